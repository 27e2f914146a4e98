"""A config loader that composes each shape of a sweep's jobs once per process.

Every job of a sweep composes its configuration where it runs (Hydra's
``load_sweep_config``): the defaults tree, each config file loaded and merged, then the
overrides applied; ~80 ms a job of the reproduction, all Python. The jobs of one study
differ only in plain values (``seed=3``, ``dataset.contradiction_rate=0.25``,
``hydra.sweep.subdir=7``), which change neither the defaults tree nor which files are
merged. :class:`MemoConfigLoader` composes the first job of each *shape* (its overrides with
the plain values blanked, their keys and places kept) with Hydra and keeps the result; a
later job of that shape is a copy of it with the job's values applied by Hydra's own override
step (``ConfigLoaderImpl._apply_overrides_to_config``) and the fields Hydra derives from the
overrides set again as ``_load_configuration_impl`` sets them (``hydra.overrides``,
``hydra.job.override_dirname``, ``hydra.runtime.cwd``, the copied environment): ~8 ms.
Plain means ``key=scalar`` (a dict or list value would merge into the first job's value
instead of replacing the file's) on a key that does not choose a config group option: a
``key=value`` that Hydra's defaults list of a composed job counts as a group choice
(``embedder=minilm``) is part of the shape from then on. Anything else composes with Hydra
every time. Over the reproduction's 621 jobs the copies equal Hydra's compositions (the
hydra node included); the tests check that on jobs of every study and on the cases above.

The memo lives in the process (a module dict keyed by the loader's token): a launcher that
pickles the loader with each job (joblib, Ray, submitit) still reuses it in each worker. It
lives here, not beside the sweepers in ``hydra_plugins``: Hydra's plugin scan executes every
module there again whenever a joblib worker starts a job (its singletons are restored, the
plugins rescanned), which would empty the memo and change the class the loader unpickles to.
"""

from __future__ import annotations

import copy
import os
import uuid
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra.core.config_loader import ConfigLoader
from hydra.core.object_type import ObjectType
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

#: (loader token, config name, shape) -> the composed configuration of the shape's first job
_TEMPLATES: dict[tuple[Any, ...], DictConfig] = {}
#: (loader token, config name) -> keys seen choosing a config group option (``embedder``)
_GROUPS: dict[tuple[Any, ...], set[str]] = {}
_PARSED: dict[str, Override] = {}
_SCALARS = (str, int, float, bool, type(None))


def _parse(line: str) -> Override:
    parsed = _PARSED.get(line)
    if parsed is None:
        (parsed,) = OverridesParser.create().parse_overrides([line])
        _PARSED[line] = parsed
    return parsed


def _plain_value(o: Override) -> bool:
    """``key=scalar``: no ``+``/``++``/``~``, no package, no sweep, not a group path."""
    return (o.type == OverrideType.CHANGE and o.package is None and not o.is_sweep_override()
            and "/" not in o.key_or_group and isinstance(o.value(), _SCALARS))


def _shape(parsed: list[Override], plain: list[bool]) -> tuple[tuple[str, str], ...]:
    """The overrides with the plain values blanked (their keys and places kept)."""
    return tuple(("=", o.key_or_group) if p else ("", o.input_line)
                 for o, p in zip(parsed, plain, strict=True))


class MemoConfigLoader(ConfigLoader):
    """Hydra's config loader, with :meth:`load_sweep_config` memoised per job shape."""

    def __init__(self, inner: ConfigLoader) -> None:
        self.inner = inner
        self.token = uuid.uuid4().hex
        self.hits = 0  # jobs composed from a memoised shape (in this process)

    def __getstate__(self) -> dict[str, Any]:
        return {"inner": self.inner, "token": self.token, "hits": 0}

    # -- the memoised call ------------------------------------------------------------------

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]
                          ) -> DictConfig:
        overrides = [*OmegaConf.to_container(master_config.hydra.overrides.hydra),
                     *sweep_overrides]
        cfg = self._compose(master_config.hydra.job.config_name, overrides)
        # as Hydra's: the master's cache, for the values resolved once per sweep (``now``)
        OmegaConf.copy_cache(from_config=master_config, to_config=cfg)
        return cfg

    def _compose(self, config_name: str | None, overrides: list[str]) -> DictConfig:
        parsed = [_parse(line) for line in overrides]
        groups = _GROUPS.setdefault((self.token, config_name), set())
        plain = self._plain(parsed, groups)
        key = (self.token, config_name, _shape(parsed, plain))
        template = _TEMPLATES.get(key)
        if template is None:
            cfg = self.inner.load_configuration(config_name, overrides, RunMode.RUN)
            # overrides that look like values but choose a config group option (``embedder=
            # minilm``) are part of the shape: Hydra's defaults list of this job tells them
            defaults = self.inner.compute_defaults_list(config_name, overrides, RunMode.RUN)
            values = {o.input_line for o in defaults.config_overrides}
            groups.update(o.key_or_group for o, p in zip(parsed, plain, strict=True)
                          if p and o.input_line not in values)
            plain = self._plain(parsed, groups)
            _TEMPLATES[(self.token, config_name, _shape(parsed, plain))] = copy.deepcopy(cfg)
            return cfg
        self.hits += 1
        cfg = copy.deepcopy(template)
        ConfigLoaderImpl._apply_overrides_to_config(
            [o for o, p in zip(parsed, plain, strict=True) if p], cfg)
        # Hydra appends each override's line to what the configuration lists: the
        # template's own lines, at the end of those lists, become this job's
        for name, lines in (("hydra", [o.input_line for o in parsed if o.is_hydra_override()]),
                            ("task", [o.input_line for o in parsed
                                      if not o.is_hydra_override()])):
            listed = list(cfg.hydra.overrides[name])
            cfg.hydra.overrides[name] = [*listed[: len(listed) - len(lines)], *lines]
        with open_dict(cfg.hydra):
            for name in cfg.hydra.job.env_copy:
                cfg.hydra.job.env_set[name] = os.environ[name]
        cfg.hydra.runtime.cwd = os.getcwd()
        dirname = cfg.hydra.job.config.override_dirname
        cfg.hydra.job.override_dirname = get_overrides_dirname(
            overrides=[o for o in parsed if not o.is_hydra_override()],
            kv_sep=dirname.kv_sep, item_sep=dirname.item_sep,
            exclude_keys=dirname.exclude_keys)
        return cfg

    @staticmethod
    def _plain(parsed: list[Override], groups: set[str]) -> list[bool]:
        return [_plain_value(o) and o.key_or_group not in groups for o in parsed]

    # -- everything else: Hydra's ----------------------------------------------------------

    def load_configuration(self, config_name: str | None, overrides: list[str],
                           run_mode: RunMode, from_shell: bool = True,
                           validate_sweep_overrides: bool = True) -> DictConfig:
        return self.inner.load_configuration(config_name, overrides, run_mode, from_shell,
                                             validate_sweep_overrides)

    def get_search_path(self) -> Any:
        return self.inner.get_search_path()

    def get_sources(self) -> Any:
        return self.inner.get_sources()

    def list_groups(self, parent_name: str) -> list[str]:
        return self.inner.list_groups(parent_name)

    def get_group_options(self, group_name: str,
                          results_filter: ObjectType | None = ObjectType.CONFIG,
                          config_name: str | None = None,
                          overrides: list[str] | None = None) -> list[str]:
        return self.inner.get_group_options(group_name, results_filter, config_name,
                                            overrides)

    def compute_defaults_list(self, config_name: str | None, overrides: list[str],
                              run_mode: RunMode) -> Any:
        return self.inner.compute_defaults_list(config_name, overrides, run_mode)


def memo_context(hydra_context: Any) -> Any:
    """``hydra_context`` with its config loader wrapped in a :class:`MemoConfigLoader`; as it
    is under a Hydra other than 1.3, whose ``_load_configuration_impl`` the memo mirrors."""
    import hydra
    from hydra.types import HydraContext

    if (isinstance(hydra_context.config_loader, MemoConfigLoader)
            or not hydra.__version__.startswith("1.3.")):
        return hydra_context
    return HydraContext(config_loader=MemoConfigLoader(hydra_context.config_loader),
                        callbacks=hydra_context.callbacks)
