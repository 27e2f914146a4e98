"""Cosine vector indexes, exact (numpy) and approximate (hnswlib), behind one interface.

An index owns its vectors: stores keep only labels (non-negative int64 row ids chosen by the
caller) and read vectors back with ``get_vectors``. Vectors are normalised to unit length on
``add``, so ``get_vectors`` returns the unit vectors; a zero, NaN or infinite vector is
rejected. Adding a label that is already present replaces its vector.

``search`` returns ``(labels, similarities)``, both 2-D with one row per query and
``min(k, len(index))`` columns, best first, ties broken by smaller label.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import hnswlib
import numpy as np

from .fileio import atomic_write

_QUERY_BLOCK_BYTES = 1 << 26  # similarity block per exact search step (64 MiB of float32)
#: rows normalised at a time: their float64 temporaries (3 MB at 384-d) stay in the CPU's
#: caches (8,192 rows took twice as long); each row's result is the same whatever the block
_ROW_BLOCK = 1024


@runtime_checkable
class VectorIndex(Protocol):
    """A cosine-similarity index over labelled vectors."""

    dim: int

    def __len__(self) -> int: ...

    def add(self, labels: np.ndarray, vectors: np.ndarray) -> None: ...

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...

    def get_vectors(self, labels: np.ndarray) -> np.ndarray: ...

    def save(self, path: str | os.PathLike[str]) -> None: ...

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> VectorIndex: ...


def _check_labels(labels: Any) -> np.ndarray:
    arr = np.asarray(labels)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"labels must be integers, got dtype {arr.dtype}")
    if arr.min() < 0 or (arr.dtype.kind == "u" and arr.max() > np.iinfo(np.int64).max):
        raise ValueError("labels must be non-negative int64")
    return arr.astype(np.int64)


def _unit_rows(vectors: Any, dim: int, names: np.ndarray | None) -> np.ndarray:
    """``vectors`` as float32 unit rows; ValueError naming the first bad row.

    ``names`` are the rows' labels; None means the rows are queries, named by position.
    """
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    if x.ndim != 2 or x.shape[1] != dim:
        raise ValueError(f"expected vectors of shape (n, {dim}), got {np.shape(vectors)}")
    if len(x) <= _ROW_BLOCK:
        norms = np.linalg.norm(x.astype(np.float64), axis=1)
    else:  # in blocks: float64 temporaries of a whole large batch cost more than the math
        norms = np.concatenate([np.linalg.norm(x[s:s + _ROW_BLOCK].astype(np.float64), axis=1)
                                for s in range(0, len(x), _ROW_BLOCK)])
    bad = np.flatnonzero(~np.isfinite(norms) | (norms == 0))
    if bad.size:
        i = int(bad[0])
        what = f"query {i}" if names is None else f"vector with label {int(names[i])}"
        problem = "zero norm" if norms[i] == 0 else "non-finite values"
        raise ValueError(f"{what} has {problem}; cosine similarity is undefined")
    if len(x) <= _ROW_BLOCK:
        return (x / norms[:, None]).astype(np.float32)
    out = np.empty(x.shape, dtype=np.float32)
    for s in range(0, len(x), _ROW_BLOCK):
        out[s:s + _ROW_BLOCK] = x[s:s + _ROW_BLOCK] / norms[s:s + _ROW_BLOCK, None]
    return out


def _prepare_add(labels: Any, vectors: Any, dim: int) -> tuple[np.ndarray, np.ndarray]:
    labels = _check_labels(labels)
    x = np.asarray(vectors, dtype=np.float32)
    if labels.size == 0 and x.size == 0:
        return labels, np.empty((0, dim), dtype=np.float32)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    if x.shape[0] != labels.size:
        raise ValueError(f"{labels.size} labels for {x.shape[0]} vectors")
    uniq, counts = np.unique(labels, return_counts=True)
    if uniq.size != labels.size:
        raise ValueError(f"label {int(uniq[counts > 1][0])} appears twice in one add")
    return labels, _unit_rows(x, dim, labels)


def _empty_result(q: int, k: int = 0) -> tuple[np.ndarray, np.ndarray]:
    return np.empty((q, k), dtype=np.int64), np.empty((q, k), dtype=np.float32)


def _order(labels: np.ndarray, sims: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort each row by similarity descending, then label ascending."""
    order = np.lexsort((labels, -sims), axis=-1)
    return np.take_along_axis(labels, order, -1), np.take_along_axis(sims, order, -1)


def _top_k(sims: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` columns of each row of ``sims`` (q, n), ties broken by smaller label
    (compiled: :func:`smartvector.kernels.top_k`)."""
    global _kernels
    if _kernels is None:  # numba: loaded with the first exact search, not with the index
        from . import kernels as _kernels
    return _kernels.top_k(np.ascontiguousarray(sims, dtype=np.float32),
                          np.ascontiguousarray(labels, dtype=np.int64), k)


_kernels: Any = None  # smartvector.kernels, once an exact search has needed it


class ExactIndex:
    """Brute-force cosine search in numpy: exact, deterministic, O(n * dim) per query.

    Storage grows geometrically, so adds are amortised O(dim) per vector.
    """

    def __init__(self, dim: int) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        self._vectors = np.empty((0, dim), dtype=np.float32)
        self._labels = np.empty(0, dtype=np.int64)
        self._n = 0
        self._row: dict[int, int] = {}

    def __len__(self) -> int:
        return self._n

    def _reserve(self, n: int) -> None:
        if n <= len(self._labels):
            return
        cap = max(n, 2 * len(self._labels), 16)
        vectors = np.empty((cap, self.dim), dtype=np.float32)
        labels = np.empty(cap, dtype=np.int64)
        vectors[: self._n] = self._vectors[: self._n]
        labels[: self._n] = self._labels[: self._n]
        self._vectors, self._labels = vectors, labels

    def add(self, labels: np.ndarray, vectors: np.ndarray) -> None:
        """Add (or replace) vectors under ``labels``."""
        labels, unit = _prepare_add(labels, vectors, self.dim)
        rows = np.fromiter((self._row.get(int(lab), -1) for lab in labels), np.int64, labels.size)
        old = rows >= 0
        self._vectors[rows[old]] = unit[old]
        new = ~old
        m = int(new.sum())
        self._reserve(self._n + m)
        self._vectors[self._n : self._n + m] = unit[new]
        self._labels[self._n : self._n + m] = labels[new]
        self._row.update(zip(labels[new].tolist(), range(self._n, self._n + m), strict=True))
        self._n += m

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        q = _unit_rows(queries, self.dim, None)
        k = min(k, self._n)
        if k == 0:
            return _empty_result(len(q))
        vectors, labels = self._vectors[: self._n], self._labels[: self._n]
        out_labels = np.empty((len(q), k), dtype=np.int64)
        out_sims = np.empty((len(q), k), dtype=np.float32)
        block = max(1, _QUERY_BLOCK_BYTES // (4 * self._n))
        for s in range(0, len(q), block):
            sims = q[s : s + block] @ vectors.T
            out_labels[s : s + block], out_sims[s : s + block] = _top_k(sims, labels, k)
        return out_labels, out_sims

    def get_vectors(self, labels: np.ndarray) -> np.ndarray:
        """Stored unit vectors for ``labels``, in order; KeyError for an unknown label."""
        labels = _check_labels(labels)
        try:
            rows = [self._row[lab] for lab in labels.tolist()]
        except KeyError as e:
            raise KeyError(f"label {e.args[0]} is not in the index") from None
        return self._vectors[rows].copy()

    @property
    def labels(self) -> np.ndarray:
        """All labels, in insertion order."""
        return self._labels[: self._n].copy()

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write one ``.npz`` file at ``path`` (atomically)."""

        def write(tmp: str) -> None:
            with open(tmp, "wb") as f:  # a file object stops numpy appending ".npz"
                np.savez(
                    f,
                    dim=np.int64(self.dim),
                    labels=self._labels[: self._n],
                    vectors=self._vectors[: self._n],
                )

        atomic_write(Path(path), write)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ExactIndex:
        with np.load(path, allow_pickle=False) as data:
            index = cls(int(data["dim"]))
            labels, vectors = data["labels"], data["vectors"]
        index._vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        index._labels = np.ascontiguousarray(labels, dtype=np.int64)
        index._n = len(labels)
        index._row = {lab: i for i, lab in enumerate(labels.tolist())}
        return index

    def __repr__(self) -> str:
        return f"ExactIndex(dim={self.dim}, n={self._n})"


class HnswIndex:
    """Approximate cosine search with an hnswlib HNSW graph.

    ``num_threads`` (default 1) is used for insertion and queries. With more than one insertion
    thread the graph, and so the search results, depend on thread scheduling; with one thread
    the same adds in the same order give the same graph. Search sets ``ef = max(ef_search, k)``
    so that k results are found; in the rare case that hnswlib still returns fewer (an
    unreachable node), the search falls back to brute force. Capacity doubles as needed.
    """

    def __init__(
        self,
        dim: int,
        M: int = 16,
        ef_construction: int = 200,
        ef_search: int = 64,
        num_threads: int = 1,
        seed: int = 0,
        initial_capacity: int = 1024,
    ) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        self.M = M
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self.num_threads = num_threads
        self.seed = seed
        self._index = hnswlib.Index(space="cosine", dim=dim)
        self._index.init_index(
            max_elements=max(1, initial_capacity),
            M=M,
            ef_construction=ef_construction,
            random_seed=seed,
        )
        self._labels: set[int] = set()

    def __len__(self) -> int:
        return len(self._labels)

    @property
    def capacity(self) -> int:
        return int(self._index.get_max_elements())

    def add(self, labels: np.ndarray, vectors: np.ndarray) -> None:
        """Add (or replace) vectors under ``labels``."""
        labels, unit = _prepare_add(labels, vectors, self.dim)
        if labels.size == 0:
            return
        new = [lab for lab in labels.tolist() if lab not in self._labels]
        needed = len(self._labels) + len(new)
        if needed > self.capacity:
            # hnswlib inserts part of a batch before failing on a full index: grow first
            cap = self.capacity
            while cap < needed:
                cap *= 2
            self._index.resize_index(cap)
        self._index.add_items(unit, labels.astype(np.uint64), num_threads=self.num_threads)
        self._labels.update(new)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        q = _unit_rows(queries, self.dim, None)
        k = min(k, len(self))
        if k == 0 or len(q) == 0:
            return _empty_result(len(q), k)
        self._index.set_ef(max(self.ef_search, k))
        try:
            labels, dists = self._index.knn_query(q, k=k, num_threads=self.num_threads)
        except RuntimeError:  # fewer than k reachable: brute force over the stored vectors
            all_labels = np.fromiter(self._labels, np.int64, len(self._labels))
            sims = q @ self.get_vectors(all_labels).T
            return _top_k(sims, all_labels, k)
        sims = (1.0 - dists).astype(np.float32)
        labels = labels.astype(np.int64)
        if k > 1 and not (sims[:, 1:] >= sims[:, :-1]).any():
            return labels, sims  # strictly decreasing already: no tie to break by label
        return _order(labels, sims)

    def search_distances(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """hnswlib's own answer for already-validated float32 ``queries`` (2-D, finite, not
        zero; hnswlib normalises them) and ``1 <= k <= len(self)``: labels (uint64) and cosine
        distances, nearest first, ties not yet ordered by label: the query path's lean form
        of :meth:`search`. Falls back to :meth:`search` (similarities, int64 labels) where
        hnswlib finds fewer than ``k``: check the labels' dtype."""
        self._index.set_ef(max(self.ef_search, k))
        try:
            return self._index.knn_query(queries, k, self.num_threads)  # (keywords cost ~0.4 us)
        except RuntimeError:
            return self.search(queries, k)

    def get_vectors(self, labels: np.ndarray) -> np.ndarray:
        """Stored unit vectors for ``labels``, in order; KeyError for an unknown label."""
        labels = _check_labels(labels)
        for lab in labels.tolist():
            if lab not in self._labels:
                raise KeyError(f"label {lab} is not in the index")
        if labels.size == 0:
            return np.empty((0, self.dim), dtype=np.float32)
        if labels.size >= 1024 and 20 * labels.size > len(self):
            bulk = self._bulk_vectors(labels)
            if bulk is not None:
                return bulk
        items = self._index.get_items(labels.astype(np.uint64), return_type="numpy")
        return np.ascontiguousarray(items, dtype=np.float32)

    def _bulk_vectors(self, labels: np.ndarray) -> np.ndarray | None:
        """Vectors read from one copy of hnswlib's level-0 memory (its pickled state).

        ``get_items`` goes through a Python list of floats per vector (~20 us each), so many
        labels are read faster by copying the whole index once (~1 ns per byte). None if the
        state does not have the layout of hnswlib 0.8 (the caller then uses ``get_items``).
        """
        try:
            state = self._index.__getstate__()[0]
            n, size = state["cur_element_count"], state["size_data_per_element"]
            off, lab_off = state["offset_data"], state["label_offset"]
            raw = state["data_level0"]
            external = state["label_lookup_external"].astype(np.uint64)  # label -> internal id
            internal_of = state["label_lookup_internal"].astype(np.int64)
        except (AttributeError, IndexError, KeyError, TypeError):
            return None
        if (state.get("ser_version") != 1 or raw.size != n * size or lab_off - off != 4 * self.dim
                or state.get("space") != "cosine" or len(external) != len(internal_of)):
            return None
        want = labels.astype(np.uint64)
        order = np.argsort(external)
        pos = np.minimum(np.searchsorted(external, want, sorter=order), len(external) - 1)
        if not (external[order[pos]] == want).all():
            return None
        internal = internal_of[order[pos]]
        rows = raw.view(np.uint8).reshape(n, size)[internal, off:lab_off]
        return np.ascontiguousarray(rows).view(np.float32)

    @property
    def labels(self) -> np.ndarray:
        """All labels, sorted."""
        return np.array(sorted(self._labels), dtype=np.int64)

    def _params(self) -> dict[str, Any]:
        return {
            "dim": self.dim,
            "M": self.M,
            "ef_construction": self.ef_construction,
            "ef_search": self.ef_search,
            "num_threads": self.num_threads,
            "seed": self.seed,
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the hnswlib graph at ``path`` and its parameters at ``path + '.json'``.

        Each file is written to a temporary name and renamed into place. The sidecar records
        the element count and file size, so ``load`` detects a graph and sidecar from different
        saves (an interruption between the two renames).
        """
        path = Path(path)
        atomic_write(path, self._index.save_index)
        meta = {**self._params(), "count": len(self), "file_size": path.stat().st_size}

        def write_meta(tmp: str) -> None:
            Path(tmp).write_text(json.dumps(meta, indent=1))

        atomic_write(_sidecar(path), write_meta)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> HnswIndex:
        path = Path(path)
        meta = json.loads(_sidecar(path).read_text())
        if path.stat().st_size != meta["file_size"]:
            raise ValueError(f"{path} does not match its sidecar {_sidecar(path)}")
        keys = ["dim", "M", "ef_construction", "ef_search", "num_threads", "seed"]
        index = cls(**{key: meta[key] for key in keys}, initial_capacity=1)
        index._index.load_index(str(path))  # capacity as saved
        index._labels = set(index._index.get_ids_list())
        if len(index._labels) != meta["count"]:
            raise ValueError(f"{path} holds {len(index._labels)} vectors, not {meta['count']}")
        return index

    def __repr__(self) -> str:
        return f"HnswIndex(dim={self.dim}, n={len(self)}, M={self.M}, ef_search={self.ef_search})"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


_INDEXES: dict[str, type[ExactIndex] | type[HnswIndex]] = {"exact": ExactIndex, "hnsw": HnswIndex}


def make_index(kind: str, dim: int, **kw: Any) -> VectorIndex:
    """Build an index by kind: ``exact`` or ``hnsw`` (``kw`` go to the constructor)."""
    if kind not in _INDEXES:
        raise ValueError(f"unknown index kind {kind!r} (choose from: {', '.join(_INDEXES)})")
    return _INDEXES[kind](dim, **kw)

