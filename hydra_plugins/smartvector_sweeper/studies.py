"""Several studies' sweeps as one sweep (``hydra/sweeper=studies``), on one set of workers.

``python -m experiments.paper`` runs its synthetic studies this way, in one call of the
launcher::

    python -m experiments.run -m hydra/sweeper=studies \
        'hydra.sweeper.studies=[table1,regime_map,"weights_test store.weights.semantic=0.4"]'

Each entry is a study (``+experiment=<name>``) and, optionally, overrides of its own. Its jobs
are what ``python -m experiments.run -m +experiment=<name> <overrides> <command line>`` would
run (the study's ``hydra.sweeper.params`` expanded as Hydra's basic sweeper expands them),
written where that sweep writes them: ``hydra.sweep.dir`` of the study's own configuration
(``multirun/<study>/<time>``, with its ``multirun.yaml``), numbered from 0 per directory.

Why one sweep: a sweep per study starts the launcher's workers (imports, the MLflow store, the
compiled kernels: ~4 CPU-s each) and its own process (~4 CPU-s) again, and leaves a core idle
while its last job runs; 13 studies did that 13 times. As with ``check_first``, only the first
job of each study is composed before the launch (the errors a study's jobs share show before
any runs); every job composes its configuration again where it runs, through
:class:`experiments.compose_memo.MemoConfigLoader` (each shape of job once per process).
"""

# (no ``from __future__ import annotations``: Hydra's plugin scan runs this module without
# registering it in sys.modules, where dataclasses would look string annotations up)
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

# BasicSweeper's module, not the class: Hydra's plugin scan would list a (concrete) plugin
# class imported here; the abstract Sweeper is not listed
from hydra._internal.core_plugins import basic_sweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.plugins.sweeper import Sweeper
from hydra.types import RunMode
from omegaconf import OmegaConf


@dataclass
class StudiesSweeperConf:
    _target_: str = "hydra_plugins.smartvector_sweeper.studies.StudiesSweeper"
    studies: list[str] = field(default_factory=list)
    # a study's own ``hydra.sweeper.params`` (what its jobs expand), set by its config
    params: Optional[dict[str, str]] = None  # noqa: UP045 - OmegaConf's structured configs


ConfigStore.instance().store(group="hydra/sweeper", name="studies", node=StudiesSweeperConf,
                             provider="smartvector-bench")


#: overrides that place this sweep's own record, not the studies' jobs
_OWN_DIR = ("hydra.sweep.dir", "hydra.sweep.subdir")


def parse_study(entry: str) -> tuple[str, list[str]]:
    """``"name override ..."`` -> ``(name, [override, ...])``; ValueError unless the entry
    starts with a study name (not empty, not an override)."""
    parts = str(entry).split()
    name, extra = (parts[0], parts[1:]) if parts else ("", [])
    if not name or name.startswith(("+", "~")) or "=" in name:
        raise ValueError(f"hydra.sweeper.studies: {entry!r} does not start with a study name")
    return name, extra


def quoted(value: str) -> str:
    """``value`` as a quoted override value (taken literally by Hydra's parser)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class StudiesSweeper(Sweeper):
    """One launch of every listed study's jobs, each in its own study's sweep directory."""

    def __init__(self, studies: Sequence[str], params: Optional[dict[str, str]] = None  # noqa: UP045
                 ) -> None:
        if not studies:
            raise ValueError("hydra/sweeper=studies needs hydra.sweeper.studies=[study, ...]")
        self.studies = [parse_study(s) for s in studies]
        self.config: Any = None
        self.launcher: Any = None
        self.hydra_context: Any = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
        from hydra.core.plugins import Plugins

        from experiments.compose_memo import memo_context
        from experiments.worker_plugins import keep_plugins_in_workers

        keep_plugins_in_workers()  # a joblib worker scans Hydra's plugins once, not per job
        self.hydra_context = memo_context(hydra_context)  # each job shape composed once
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=self.hydra_context, task_function=task_function, config=config)

    def study_jobs(self, name: str, extra: list[str], arguments: list[str], resolved: Any
                   ) -> tuple[Any, list[list[str]]]:
        """A study's configuration (as its own sweep's process composes it, with the values
        ``resolved`` already resolved: the ``now`` of the directories) and its jobs."""
        loader = self.hydra_context.config_loader
        study_args = [f"+experiment={name}", *arguments, *extra]
        # without this sweep's own directory: the study's is its configuration's
        hydra_overrides = [o for o in self.config.hydra.overrides.hydra
                           if o.split("=", 1)[0].lstrip("+~") not in _OWN_DIR]
        cfg = loader.load_configuration(config_name=self.config.hydra.job.config_name,
                                        overrides=[*hydra_overrides, *study_args],
                                        run_mode=RunMode.MULTIRUN)
        OmegaConf.copy_cache(from_config=resolved, to_config=cfg)
        params = [f"{k}={v}" for k, v in (cfg.hydra.sweeper.params or {}).items()]
        parsed = OverridesParser.create(config_loader=loader).parse_overrides(
            [*params, *study_args])
        (jobs,) = basic_sweeper.BasicSweeper.split_arguments(parsed, None)
        return cfg, jobs

    def sweep(self, arguments: list[str]) -> Any:
        # this sweep's own record (resolving the ``now`` every study's directory shares)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        loader = self.hydra_context.config_loader
        batch: list[list[str]] = []
        numbered: dict[Path, int] = {}  # jobs already in each study directory
        resolved = self.config  # one ``now`` for every directory, as in one study's sweep
        for name, extra in self.studies:
            cfg, jobs = self.study_jobs(name, extra, arguments, resolved)
            study_dir = Path(str(cfg.hydra.sweep.dir))
            resolved = cfg
            if not jobs:
                continue
            loader.load_sweep_config(self.config, jobs[0])  # compose its first job now
            first = numbered.get(study_dir, 0)
            if first == 0:
                study_dir.mkdir(parents=True, exist_ok=True)
                OmegaConf.save(cfg, study_dir / "multirun.yaml")
            numbered[study_dir] = first + len(jobs)
            batch += [[*job, f"hydra.sweep.dir={quoted(str(study_dir))}",
                       f"hydra.sweep.subdir={first + i}"] for i, job in enumerate(jobs)]
        if not batch:
            return []
        results = self.launcher.launch(batch, initial_job_idx=0)
        for r in results:
            _ = r.return_value  # raises the exception of a job that failed
        return [results]
