"""Saving and loading a whole store: one ``.npz`` file (columns, index bytes and a JSON state),
written atomically."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .chunking import chunk_text
from .columns import Columns
from .config import (
    ConfidenceParams,
    ConsolidationParams,
    RelationalParams,
    RippleParams,
    ScoringWeights,
    StoreConfig,
    TemporalParams,
)
from .countlog import CountLog
from .embedders import Embedder
from .fileio import atomic_write
from .graph import EdgeGraph
from .index import ExactIndex, HnswIndex
from .vector import Event

if TYPE_CHECKING:
    from .store import SmartVectorStore

FORMAT_VERSION = 1


def save_store(store: SmartVectorStore, path: str | os.PathLike) -> Path:
    """Write the whole store to one file, atomically (temporary file, then rename)."""
    state = {
        "format": FORMAT_VERSION,
        "index_kind": "hnsw" if isinstance(store.index, HnswIndex) else "exact",
        "embedder": store.embedder.name,
        "config": dataclasses.asdict(store.config),
        "ids": store.ids, "texts": store.texts, "doc_of": store.doc_of,
        "source_of": store.source_of, "meta_of": store.meta_of,
        "events": {str(r): [dataclasses.astuple(e) for e in evs]
                   for r, evs in store.events.items()},
        "docs": {d: {"version": s.version, "text": s.text, "rows": s.rows,
                     "updated_at": s.updated_at, "depends_on": list(s.depends_on),
                     "source_type": s.source_type, "authority": s.authority}
                 for d, s in store.docs.items()},
        "pending_ripple": store.pending_ripple,
        "last_consolidated": store.last_consolidated,
        "graph": store.graph.to_dict(),
    }
    arrays = {f"col_{k}": v for k, v in store.columns.to_arrays().items()}
    with tempfile.TemporaryDirectory() as tmp:
        idx_dir = Path(tmp) / "index"
        idx_dir.mkdir()
        store.index.save(idx_dir / "index.bin")
        for f in sorted(idx_dir.iterdir()):
            arrays[f"file_{f.name}"] = np.frombuffer(f.read_bytes(), dtype=np.uint8)
    arrays["state"] = np.frombuffer(json.dumps(state).encode("utf-8"), dtype=np.uint8)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)

    return atomic_write(path, write)


def _config(cfg: dict) -> StoreConfig:
    cfg = dict(cfg)
    overfetch = cfg.pop("overfetch", None)  # stores saved before `pool` replaced it
    if overfetch is not None and "pool" not in cfg:
        cfg["pool"] = 5 * int(overfetch)
    return StoreConfig(
        confidence=ConfidenceParams(**cfg.pop("confidence")),
        weights=ScoringWeights(**cfg.pop("weights")),
        temporal=TemporalParams(**cfg.pop("temporal")),
        relational=RelationalParams(**cfg.pop("relational")),
        ripple=RippleParams(**cfg.pop("ripple")),
        consolidation=ConsolidationParams(**cfg.pop("consolidation")),
        **cfg,
    )


def load_store(cls: type[SmartVectorStore], path: str | os.PathLike,
               embedder: Embedder) -> SmartVectorStore:
    """Read a store written by :func:`save_store`; the embedder must be the one it was
    built with."""
    from .ingestion import DocState

    with np.load(Path(path), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    state = json.loads(arrays.pop("state").tobytes().decode("utf-8"))
    if state.get("format") != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported store format {state.get('format')!r}")
    if state["embedder"] != embedder.name:
        raise ValueError(f"{path}: built with embedder {state['embedder']!r}, "
                         f"not {embedder.name!r}")
    config = _config(state["config"])
    with tempfile.TemporaryDirectory() as tmp:
        for k in [k for k in arrays if k.startswith("file_")]:
            (Path(tmp) / k[5:]).write_bytes(arrays.pop(k).tobytes())
        index_cls = HnswIndex if state["index_kind"] == "hnsw" else ExactIndex
        index = index_cls.load(Path(tmp) / "index.bin")
    store = cls(embedder, index, config)
    store.columns = Columns.from_arrays({k[4:]: v for k, v in arrays.items()})
    store.ids = state["ids"]
    store.reindex_ids()
    store.texts, store.doc_of = state["texts"], state["doc_of"]
    store.source_of = [tuple(s) for s in state["source_of"]]
    store.meta_of = state["meta_of"]
    store.events = {int(r): [Event(*e) for e in evs] for r, evs in state["events"].items()}
    store.counts = CountLog.from_events(len(store.ids), store.events)
    for d, s in state["docs"].items():
        chunks = chunk_text(s["text"], config.max_chunk_chars)
        store.docs[d] = DocState(s["version"], s["text"], s["rows"], chunks, s["updated_at"],
                                 tuple(s["depends_on"]), s["source_type"], s["authority"])
    store.pending_ripple = state["pending_ripple"]
    store.last_consolidated = state["last_consolidated"]
    store.graph = EdgeGraph.from_dict(state["graph"])
    return store
