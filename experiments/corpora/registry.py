"""Datasets by name: each kind has a structured config (a dataclass with a ``kind`` field,
the schema of ``conf/dataset/<name>.yaml``), a check of its values, and a function that
materialises it as a dataset directory in the harness's format (``datasets/README.md``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from omegaconf import MISSING


@dataclass(frozen=True)
class DatasetKind:
    """How to check and materialise one kind of dataset.

    ``materialise(cfg, out_dir, base)`` returns the directory holding ``corpus.jsonl`` and
    ``queries.jsonl``: generated kinds write them into ``out_dir`` (and they are logged with
    the run), others return a path under ``base`` (the directory the user ran from)."""

    name: str
    config: type
    materialise: Callable[[Any, Path, Path], Path]
    check: Callable[[Any], None] = lambda cfg: None
    generated: bool = True


_KINDS: dict[str, DatasetKind] = {}


def register_dataset(kind: DatasetKind) -> DatasetKind:
    """Make ``kind`` available as ``dataset=<name>``."""
    if kind.name in _KINDS:
        raise ValueError(f"dataset kind {kind.name!r} registered twice")
    _KINDS[kind.name] = kind
    return kind


def dataset_kinds() -> dict[str, DatasetKind]:
    """Every registered dataset kind, by name."""
    return dict(_KINDS)


def get_kind(name: str) -> DatasetKind:
    """The kind named ``name``; a one-line ValueError lists the known ones."""
    try:
        return _KINDS[name]
    except KeyError:
        raise ValueError(f"unknown dataset kind {name!r} (choose from: "
                         f"{', '.join(sorted(_KINDS))})") from None


def config_of(kind: DatasetKind, node: dict[str, Any]) -> Any:
    """The kind's config object from a resolved config node (its ``kind`` key dropped)."""
    return kind.config(**{k: v for k, v in node.items() if k != "kind"})


# --- the built-in kinds ------------------------------------------------------------------

@dataclass
class JsonlConfig:
    """Any dataset directory in the harness's format (see datasets/README.md)."""

    kind: str = "jsonl"
    path: str = MISSING


def _jsonl_check(cfg: JsonlConfig) -> None:
    path = Path(cfg.path)
    if not (path / "corpus.jsonl").is_file() or not (path / "queries.jsonl").is_file():
        raise ValueError(f"dataset.path {str(path)!r} has no corpus.jsonl and queries.jsonl")


register_dataset(DatasetKind("jsonl", JsonlConfig, lambda cfg, out, base: base / cfg.path,
                             _jsonl_check, generated=False))


def _policy_synth() -> None:
    from .policy_synth import PolicySynthConfig, validate, write_policy_synth

    @dataclass
    class PolicySynthDatasetConfig(PolicySynthConfig):
        """The paper's synthetic corpus, generated (seeded) into the run directory."""

        kind: str = field(default="policy_synth")

    def plain(cfg: PolicySynthDatasetConfig) -> PolicySynthConfig:
        return PolicySynthConfig(**{f.name: getattr(cfg, f.name) for f in fields(
            PolicySynthConfig)})

    register_dataset(DatasetKind(
        "policy_synth", PolicySynthDatasetConfig,
        lambda cfg, out, base: write_policy_synth(plain(cfg), out / "dataset"),
        lambda cfg: validate(plain(cfg))))


_policy_synth()


def _real(name: str, config_name: str) -> None:
    """A real version history shipped in ``datasets/<name>/``, with derived questions."""
    import importlib

    mod = importlib.import_module(f"{__package__}.{name}")
    config = getattr(mod, config_name)
    register_dataset(DatasetKind(name, config,
                                 lambda cfg, out, base: mod.write(cfg, out / "dataset"),
                                 mod.validate))


_real("site_policy", "SitePolicyConfig")
_real("peps", "PepsConfig")
