"""A run's dataset: read (a directory in place) or generated (into the results directory),
always through the validating loader, once; its warnings printed as one line each."""

from __future__ import annotations

import hashlib
import sys
import warnings
from pathlib import Path

from omegaconf import DictConfig

from experiments.data.dataset import Dataset, load_dataset
from experiments.settings import Settings


def _load(path: Path) -> Dataset:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = load_dataset(path)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    return ds


def read_in_place(settings: Settings, base: Path) -> Dataset | None:
    """The dataset of a kind read where it lies (``dataset=jsonl``), validated now, before
    any other work; None for a generated kind (see :func:`materialise`)."""
    kind = settings.dataset_kind
    if kind.generated:
        return None
    return _load(kind.materialise(settings.dataset, base, base))


def materialise(settings: Settings, out_dir: Path, base: Path) -> Dataset:
    """A generated dataset, written into ``out_dir/dataset`` and read back through the
    loader."""
    return _load(settings.dataset_kind.materialise(settings.dataset, out_dir, base))


def source_of(cfg: DictConfig, settings: Settings, base: Path) -> str:
    """Where the corpus lies: ``dataset`` (in the results directory) or its absolute path."""
    generated = settings.dataset_kind.generated
    return "dataset" if generated else str((base / cfg.dataset.path).resolve())


def split_queries(ds: Dataset, split: str) -> Dataset:
    """Deterministic dev/test halves of the queries (by a hash of the query id)."""
    if split == "all":
        return ds

    def is_dev(qid: str) -> bool:
        return hashlib.sha256(qid.encode()).digest()[0] % 2 == 0

    keep = [q for q in ds.queries if is_dev(q.id) == (split == "dev")]
    return Dataset(ds.corpus, keep, ds.path, ds.unanswerable, ds.excluded)
