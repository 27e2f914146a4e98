"""Datasets by name: each kind has a structured config (a dataclass with a ``kind`` field,
the schema of ``conf/dataset/<name>.yaml``), a check of its values, and a function that
materialises it as a dataset directory in the harness's format (``datasets/README.md``).
Every module of ``experiments/data/`` that defines a ``DATASET`` is registered."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
_SCANNED = False


def register_dataset(kind: DatasetKind) -> DatasetKind:
    """Make ``kind`` available as ``dataset=<name>``."""
    if _KINDS.get(kind.name, kind) is not kind:
        raise ValueError(f"dataset kind {kind.name!r} registered twice")
    _KINDS[kind.name] = kind
    return kind


def _scan() -> None:
    """Register the ``DATASET`` of every module of this package: a named dataset is one
    module here and one yaml in ``conf/dataset/``."""
    global _SCANNED
    if _SCANNED:
        return
    _SCANNED = True
    import importlib
    import pkgutil

    from experiments import data

    for mod in pkgutil.iter_modules(data.__path__):
        kind = getattr(importlib.import_module(f"{data.__name__}.{mod.name}"), "DATASET", None)
        if isinstance(kind, DatasetKind):
            register_dataset(kind)


def dataset_kinds() -> dict[str, DatasetKind]:
    """Every registered dataset kind, by name."""
    _scan()
    return dict(_KINDS)


def get_kind(name: str) -> DatasetKind:
    """The kind named ``name``; a one-line ValueError lists the known ones."""
    _scan()
    try:
        return _KINDS[name]
    except KeyError:
        raise ValueError(f"unknown dataset kind {name!r} (choose from: "
                         f"{', '.join(sorted(_KINDS))})") from None


def config_of(kind: DatasetKind, node: dict[str, Any]) -> Any:
    """The kind's config object from a resolved config node (its ``kind`` key dropped)."""
    return kind.config(**{k: v for k, v in node.items() if k != "kind"})


# --- the built-in kind: any directory in the format -------------------------------------

@dataclass
class JsonlConfig:
    """Any dataset directory in the harness's format (see datasets/README.md)."""

    kind: str = "jsonl"
    path: str = MISSING


def _jsonl_check(cfg: JsonlConfig) -> None:
    path = Path(cfg.path)
    if not (path / "corpus.jsonl").is_file() or not (path / "queries.jsonl").is_file():
        raise ValueError(f"dataset.path {str(path)!r} has no corpus.jsonl and queries.jsonl")


DATASET = DatasetKind("jsonl", JsonlConfig, lambda cfg, out, base: base / cfg.path,
                      _jsonl_check, generated=False)
