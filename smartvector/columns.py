"""Growable columnar storage: one numpy array per per-vector field."""

from __future__ import annotations

import numpy as np

#: name -> (dtype, fill value for new rows)
SCHEMA: dict[str, tuple[str, float]] = {
    "doc_version": ("i4", 0),
    "chunk_index": ("i4", 0),
    "start": ("i8", 0),
    "end": ("i8", 0),
    "created_at": ("f8", np.nan),
    "valid_from": ("f8", -np.inf),
    "valid_to": ("f8", np.inf),
    "authority": ("f8", 0.0),
    "base_confidence": ("f8", 0.0),
    "positive": ("i4", 0),
    "negative": ("i4", 0),
    "accesses": ("i4", 0),
    "penalty": ("f8", 0.0),
    "last_accessed": ("f8", np.nan),
    "last_validated": ("f8", np.nan),
    "last_event_at": ("f8", -np.inf),
    "consolidated_at": ("f8", np.inf),
    "dormant_at": ("f8", np.inf),
    "superseded_at": ("f8", np.inf),
    "archived_at": ("f8", np.inf),
    "lost_at": ("f8", np.inf),  # when it lost a contradiction (consolidation)
    "n_rel_edges": ("i4", 0),
    "edges_changed_at": ("f8", -np.inf),
}


class Columns:
    """Arrays that grow geometrically; ``self[name]`` is a view of the used rows."""

    def __init__(self, capacity: int = 1024) -> None:
        self._n = 0
        self._cap = max(1, capacity)
        self._data = {k: np.full(self._cap, fill, dtype=dt) for k, (dt, fill) in SCHEMA.items()}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, name: str) -> np.ndarray:
        return self._data[name][: self._n]

    def append(self, count: int) -> np.ndarray:
        """Add ``count`` rows filled with defaults; returns their row numbers."""
        need = self._n + count
        if need > self._cap:
            cap = self._cap
            while cap < need:
                cap *= 2
            for k, (dt, fill) in SCHEMA.items():
                grown = np.full(cap, fill, dtype=dt)
                grown[: self._n] = self._data[k][: self._n]
                self._data[k] = grown
            self._cap = cap
        rows = np.arange(self._n, need, dtype=np.int64)
        self._n = need
        return rows

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {k: self[k].copy() for k in SCHEMA}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Columns:
        n = len(next(iter(arrays.values()))) if arrays else 0
        cols = cls(max(n, 1))
        cols.append(n)
        for k, (_, fill) in SCHEMA.items():
            cols._data[k][:n] = arrays.get(k, fill)  # columns added later keep their default
        return cols

    def nbytes(self) -> int:
        """Bytes held by the used rows of every column."""
        return sum(self[k].nbytes for k in SCHEMA)
