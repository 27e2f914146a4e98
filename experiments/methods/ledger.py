"""Chunk bookkeeping for methods that keep their own index (BM25, hybrid, a vector
database): the same chunking, vector ids and surgical-update semantics as the SmartVector
store, and the visibility of every chunk at a time ``t``."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from experiments.data.dataset import DocVersion
from smartvector.chunking import Chunk, chunk_text, diff_chunks


@dataclass
class _Doc:
    chunks: list[Chunk]
    rows: list[int]


@dataclass
class ChunkLedger:
    """Rows in ingestion (time) order: ``rows < n`` are exactly those created by a time."""

    max_chunk_chars: int = 1000
    ids: list[str] = field(default_factory=list)
    doc_of: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    created: list[float] = field(default_factory=list)
    valid_from: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)  # min(valid_to, superseded_at)
    docs: dict[str, _Doc] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, v: DocVersion) -> tuple[list[int], list[int]]:
        """Ingest one version: unchanged chunks keep their rows (their end moves to this
        version's ``valid_to``), changed or removed ones end now. Returns (new rows, rows
        whose end changed)."""
        t = v.ts
        end = np.inf if v.valid_to_ts is None else v.valid_to_ts
        chunks = chunk_text(v.text, self.max_chunk_chars)
        old = self.docs.get(v.doc_id)
        keep: dict[int, int] = {}
        changed: list[int] = []
        if old is not None:
            diff = diff_chunks(old.chunks, chunks)
            # across a gap (the old version ended before this one starts) nothing is kept:
            # a kept row's one window would cover the gap (the store does the same)
            gap = min(self.ends[r] for r in old.rows) < t
            keep = {} if gap else {j: old.rows[i] for i, j in diff.kept}
            kept_rows = set(keep.values())
            for r in old.rows:
                if r not in kept_rows:
                    self.ends[r] = min(self.ends[r], t)
                    changed.append(r)
            for r in kept_rows:
                self.ends[r] = end
                changed.append(r)
        rows, new = [], []
        for c in chunks:
            if c.index in keep:
                rows.append(keep[c.index])
                continue
            r = len(self.ids)
            self.ids.append(f"{v.doc_id}@v{v.version}#{c.index}")
            self.doc_of.append(v.doc_id)
            self.texts.append(c.text)
            self.created.append(t)
            self.valid_from.append(t)
            self.ends.append(end)
            rows.append(r)
            new.append(r)
        self.docs[v.doc_id] = _Doc(chunks, rows)
        return new, changed

    def created_by(self, at: float) -> int:
        """How many rows exist at ``at`` (rows are appended in time order)."""
        return int(np.searchsorted(np.asarray(self.created), at, side="right"))

    def visible(self, at: float, validity: bool) -> np.ndarray:
        """Boolean mask over the rows created by ``at``; with ``validity`` only those in
        force at ``at`` (``valid_from <= at < min(valid_to, superseded)``)."""
        n = self.created_by(at)
        if not validity:
            return np.ones(n, dtype=bool)
        vf = np.asarray(self.valid_from[:n])
        end = np.asarray(self.ends[:n])
        return (vf <= at) & (at < end)
