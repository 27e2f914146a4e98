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


#: name -> (dtype, column in that dtype's block): each dtype's fields share one 2-D array, row
#: by row, so that compiled kernels (:mod:`smartvector.kernels`) read every field of a vector
#: from one argument and one or two cache lines
FIELDS: dict[str, tuple[str, int]] = {}
for _name, (_dt, _) in SCHEMA.items():
    FIELDS[_name] = (_dt, sum(1 for d, _ in FIELDS.values() if d == _dt))
DTYPES = tuple(dict.fromkeys(dt for dt, _ in SCHEMA.values()))


class Columns:
    """Arrays that grow geometrically; ``self[name]`` is a view of the used rows.

    The fields of one dtype are the columns of one row-major 2-D block (``block(dtype)``):
    a query reads a few fields of a few scattered vectors, and each vector's fields share a
    cache line or two; a scan of one field over every vector is strided (slower, but rare)."""

    def __init__(self, capacity: int = 1024) -> None:
        self._n = 0
        self._cap = max(1, capacity)
        self._blocks = {dt: np.empty((self._cap, sum(1 for d, _ in FIELDS.values() if d == dt)),
                                     dtype=dt) for dt in DTYPES}
        for k, (dt, i) in FIELDS.items():
            self._blocks[dt][:, i] = SCHEMA[k][1]
        self._views()

    def __getstate__(self) -> dict:
        return {"n": self._n, "cap": self._cap, "blocks": self._blocks}

    def __setstate__(self, state: dict) -> None:  # copies and pickles: views of the blocks
        self._n, self._cap, self._blocks = state["n"], state["cap"], state["blocks"]
        self._views()

    def _views(self) -> None:
        self._data = {k: self._blocks[dt][:, i] for k, (dt, i) in FIELDS.items()}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, name: str) -> np.ndarray:
        return self._data[name][: self._n]

    def block(self, dtype: str) -> np.ndarray:
        """The whole (capacity, fields) backing array of one dtype's fields (every row, not
        just the used ones: for kernels, which index used rows only); column
        ``FIELDS[name][1]`` is ``name``. Replaced when the columns grow."""
        return self._blocks[dtype]

    def append(self, count: int) -> np.ndarray:
        """Add ``count`` rows filled with defaults; returns their row numbers."""
        need = self._n + count
        if need > self._cap:
            cap = self._cap
            while cap < need:
                cap *= 2
            for dt, old in self._blocks.items():
                grown = np.empty((cap, old.shape[1]), dtype=dt)
                grown[: self._n] = old[: self._n]
                self._blocks[dt] = grown
            for k, (dt, i) in FIELDS.items():
                self._blocks[dt][self._n:, i] = SCHEMA[k][1]
            self._cap = cap
            self._views()
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
