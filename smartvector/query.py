"""Retrieval: the candidate pool of a query at a time, its four signals and their ranking, in
one compiled call for the common case (:mod:`.kernels`); a mixin of
:class:`~smartvector.store.SmartVectorStore`, whose columns, counts, graph and index it
reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from . import kernels
from .config import ScoringWeights
from .scoring import relational_signal, temporal_signal
from .timeutil import TimeLike, to_ts
from .vector import Hit, Status

if TYPE_CHECKING:  # (the store mixes this class in)
    from .store import SmartVectorStore

_FETCH_MARGIN = 1.25  # first fetch = n / (estimated visible share) * margin
_STATUS = tuple(Status)
_new, _set = object.__new__, object.__setattr__
_NO_COUNTS = np.empty((4, 0), np.float64)  # kernels: "read the columns' current counts"
_NO_EDGES = np.empty(0, np.int64)
_U64 = np.dtype(np.uint64)  # hnswlib's label dtype


@dataclass
class Candidates:
    """Rows retrieved for one query, with everything a ranking function needs."""

    rows: np.ndarray
    semantic: np.ndarray
    at: float
    store: SmartVectorStore = field(repr=False)
    #: whether any row has events / edges recorded after ``at`` (None: not known yet)
    late: tuple[bool, bool] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> np.ndarray:
        return self.store.columns[name][self.rows]


@dataclass(frozen=True)
class SearchResult:
    """A ranked pool: every candidate's row, score and four signals, best first."""

    store: SmartVectorStore = field(repr=False)
    at: float
    pool: int
    rows: np.ndarray
    score: np.ndarray
    semantic: np.ndarray
    temporal: np.ndarray
    confidence: np.ndarray
    relational: np.ndarray
    status: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)

    def signals(self) -> dict[str, np.ndarray]:
        """The four signals of the ranked pool, by name."""
        return {"semantic": self.semantic, "temporal": self.temporal,
                "confidence": self.confidence, "relational": self.relational}

    def hits(self, k: int | None = None) -> list[Hit]:
        """The first ``k`` (default: all) as :class:`Hit` records."""
        s = self.store
        n = len(self.rows) if k is None else min(k, len(self.rows))
        return [
            Hit(s.ids[r], s.doc_of[r], s.texts[r], *values, _STATUS[st])
            for r, st, *values in zip(
                self.rows[:n].tolist(), self.status[:n].tolist(), self.score[:n].tolist(),
                self.semantic[:n].tolist(), self.temporal[:n].tolist(),
                self.confidence[:n].tolist(), self.relational[:n].tolist(), strict=True)
        ]


def _result(store: SmartVectorStore, at: float, pool: int, rows: np.ndarray, sig: np.ndarray,
            status: np.ndarray) -> SearchResult:
    """``SearchResult(store, at, pool, rows, *sig, status)`` for a kernel's (5, m) signals
    (score, semantic, temporal, confidence, relational), without the frozen ``__init__``'s
    ten ``object.__setattr__`` calls (~0.7 us of a query)."""
    r = _new(SearchResult)
    _set(r, "__dict__", {"store": store, "at": at, "pool": pool, "rows": rows, "score": sig[0],
                         "semantic": sig[1], "temporal": sig[2], "confidence": sig[3],
                         "relational": sig[4], "status": status})
    return r


def _widened(fetch: int, n: int, kept: int, total: int) -> int:
    """The next fetch of a search whose ``fetch`` rows held only ``kept`` of the ``n``
    visible rows it needs: grown by the missing share x the margin, 2x to 8x, at most
    ``total``."""
    grow = min(8.0, max(2.0, _FETCH_MARGIN * n / max(kept, 1)))
    return min(total, int(fetch * grow) + 1)


def first_fetch(n: int, share: float, ef_search: int, total: int) -> int:
    """Rows to fetch from an index of ``total`` rows to keep ``n`` when a ``share`` of them
    is visible: ``n`` / share x a margin (share counted as at least 1/64), at least
    ``ef_search``, at most ``total``."""
    fetch = n if share >= 1 else int(n * _FETCH_MARGIN / max(share, 1 / 64)) + 1
    return min(total, max(fetch, ef_search))




class Querying:
    """The store's retrieval methods (see :meth:`search`, the one ranking path)."""

    # ---------------------------------------------------------------- retrieval
    def candidates(
        self, query_vector: np.ndarray, at: TimeLike, n: int, lifecycle: bool = True
    ) -> Candidates:
        """The ``n`` visible rows nearest the query (fewer only if fewer exist).

        Over-fetches from the index and filters (created by ``at``, and with ``lifecycle``,
        not deprecated or archived at ``at``), widening the fetch until enough survive or the
        whole index has been seen. The first fetch is ``n`` divided by the share of rows
        visible at ``at`` (estimated on an evenly spaced sample of rows), with a margin, so
        that one index search is usually enough; a widening scales the fetch by the survival
        rate it saw.
        """
        t = to_ts(at)
        total = len(self.index)
        if total == 0 or n <= 0:
            return Candidates(np.empty(0, dtype=np.int64), np.empty(0), t, self, (False, False))
        q = np.asarray(query_vector, dtype=np.float32).reshape(1, -1)
        return self._pool(q, t, n, lifecycle, self._first_fetch(t, n, lifecycle, total))

    def _first_fetch(self, t: float, n: int, lifecycle: bool, total: int) -> int:
        """``n`` / the visible share x a margin, and at least the index's ``ef_search`` (an
        HNSW search explores that many rows whatever ``k``, and its first ``k`` results are
        the same: asking for them all costs nothing and spares most second searches)."""
        share = self._share_cache.get((t, lifecycle, len(self.columns)))  # visible_share's
        if share is None:
            share = self.visible_share(t, lifecycle)
        return first_fetch(n, share, getattr(self.index, "ef_search", 0), total)

    def _index_search(self, q: np.ndarray, fetch: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """Labels and similarities, or hnswlib's distances (then the flag is True), of the
        float32 queries ``q`` (rows)."""
        raw = getattr(self.index, "search_distances", None)
        if raw is None:
            labels, sims = self.index.search(q, fetch)  # validates and normalises
            return labels, sims, False
        if q.shape[1] != self.index.dim:  # the kernel checks the values (first_visible)
            raise ValueError(f"expected vectors of shape (n, {self.index.dim}), got {q.shape}")
        labels, values = raw(q, fetch)
        if labels.dtype == _U64:  # hnswlib's labels and distances
            return labels.view(np.int64), values, True  # (labels < 2^63: same numbers)
        return labels, values, False

    def _pool(self, q: np.ndarray, t: float, n: int, lifecycle: bool, fetch: int,
              first: tuple[np.ndarray, np.ndarray, bool] | None = None) -> Candidates:
        """Widening loop of :meth:`candidates` for one query (a (1, dim) row; ``first``: the
        result of the first fetch, when a batched search already made it)."""
        total = len(self.index)
        while True:
            labels, values, is_dist = first if first is not None else self._index_search(
                q, fetch)
            first = None
            rows, sem, kept, late_ev, late_ed = kernels.first_visible(
                q[0], labels[0], values[0], is_dist, t, self.columns.block("f8"), lifecycle, n)
            if kept < 0:
                problem = "zero norm" if kept == -1 else "non-finite values"
                raise ValueError(f"query 0 has {problem}; cosine similarity is undefined")
            if kept >= n or fetch >= total:
                # exactly the n nearest visible rows, however many were fetched: the pool
                # must not depend on how many invisible (future, deprecated) rows exist
                return Candidates(rows, sem, t, self, (late_ev, late_ed))
            fetch = _widened(fetch, n, kept, total)

    def visible_share(self, at: TimeLike, lifecycle: bool = True) -> float:
        """Estimated share of rows visible at ``at`` (created, and with ``lifecycle`` not
        deprecated), counted on at most ~1,000 evenly spaced rows: deterministic. Remembered
        per time until rows are added or deprecated (it only sizes the first index fetch)."""
        t, n = to_ts(at), len(self.columns)
        key = (t, lifecycle, n)
        share = self._share_cache.get(key)
        if share is None:
            if len(self._share_cache) >= 4096:
                self._share_cache.clear()
            share = self._share_cache[key] = kernels.visible_share(
                self.columns.block("f8"), n, t, lifecycle)
        return share

    def signals(self, cand: Candidates) -> dict[str, np.ndarray]:
        """The four signals of every candidate."""
        c, rows, t = self.columns, cand.rows, cand.at
        return {
            "semantic": cand.semantic,
            "temporal": temporal_signal(
                t, c["created_at"][rows], c["valid_from"][rows], c["valid_to"][rows],
                self.config.temporal, self.ended_at(rows, t)),
            "confidence": self.confidence_at(rows, t),
            "relational": relational_signal(
                self.relational_edges_at(rows, t), self.config.relational),
        }

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self.embedder.encode([text]), dtype=np.float32)[0]

    def search(
        self,
        text: str | None,
        at: TimeLike,
        k: int = 5,
        *,
        vector: np.ndarray | None = None,
        pool: int | None = None,
        weights: ScoringWeights | None = None,
        lifecycle: bool = True,
        record_access: bool | None = None,
    ) -> SearchResult:
        """The one ranking path: the ``pool`` nearest visible vectors at ``at``, ranked by the
        four-signal score.

        ``pool`` (default ``config.pool``) is how many nearest visible candidates are re-ranked;
        it does not depend on ``k``, so the ranking (and the top-1) is the same whatever ``k``.
        The result holds the whole ranked pool with every signal; ``k`` only says how many of
        the best have their access recorded at ``at`` (unless ``record_access`` is False, or
        the config says so). ``weights`` overrides the configured ones; with
        ``lifecycle=False`` deprecated and archived vectors compete too.
        """
        n = self._checked_pool(k, pool)
        if vector is None:
            if not text or not text.strip():
                raise ValueError("empty query text")
            vector = self.embed_query(text)
        t, total = to_ts(at), len(self.index)
        record = self.config.record_access if record_access is None else record_access
        if total == 0:
            return self.rank(self.candidates(vector, t, n, lifecycle), weights, n)
        q = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        fetch = self._first_fetch(t, n, lifecycle, total)
        return self._ranked(q, t, n, k, fetch, total, self._index_search(q, fetch), weights,
                            lifecycle, record)

    def search_batch(
        self,
        vectors: np.ndarray,
        at: TimeLike | Sequence[TimeLike],
        k: int = 5,
        *,
        pool: int | None = None,
        weights: ScoringWeights | None = None,
        lifecycle: bool = True,
        record_access: bool | None = None,
    ) -> list[SearchResult]:
        """:meth:`search` for many query vectors (rows of ``vectors``) at one time or one
        time each: for sweeps and offline evaluation.

        The results, and the store afterwards, are those of successive :meth:`search` calls
        in row order (accesses recorded by one query count for the next). What is batched is
        the index search: one call per group of queries with the same first fetch (on the
        index's threads). With the exact index a batched matrix product may round a
        similarity differently in the last bit."""
        n = self._checked_pool(k, pool)
        Q = np.asarray(vectors, dtype=np.float32)
        if Q.ndim != 2:
            raise ValueError(f"vectors must be 2-D (one query per row), got shape {Q.shape}")
        ats = [at] * len(Q) if isinstance(at, TimeLike) else list(at)
        if len(ats) != len(Q):
            raise ValueError(f"{len(ats)} times for {len(Q)} query vectors")
        ts = [to_ts(a) for a in ats]
        record = self.config.record_access if record_access is None else record_access
        total = len(self.index)
        if total == 0:
            return [self.rank(self.candidates(q, t, n, lifecycle), weights, n)
                    for q, t in zip(Q, ts, strict=True)]
        fetches = [self._first_fetch(t, n, lifecycle, total) for t in ts]
        first: list = [None] * len(Q)
        for fetch in sorted(set(fetches)):
            group = [i for i, f in enumerate(fetches) if f == fetch]
            labels, values, is_dist = self._index_search(Q[group], fetch)
            for j, i in enumerate(group):
                first[i] = (labels[j:j + 1], values[j:j + 1], is_dist)
        return [self._ranked(Q[i:i + 1], ts[i], n, k, fetches[i], total, first[i], weights,
                             lifecycle, record) for i in range(len(Q))]

    def _checked_pool(self, k: int, pool: int | None) -> int:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        pool = self.config.pool if pool is None else pool
        if not isinstance(pool, int | np.integer) or isinstance(pool, bool) or pool < 1:
            raise ValueError(f"pool must be an int >= 1, got {pool!r}")
        return int(pool)

    def _ranked(self, q: np.ndarray, t: float, n: int, k: int, fetch: int, total: int,
                first: tuple[np.ndarray, np.ndarray, bool], weights: ScoringWeights | None,
                lifecycle: bool, record: bool) -> SearchResult:
        """The ranked pool of one query given its first index result (of ``fetch`` rows;
        ``total`` is ``len(self.index)``); records the accesses of the best ``k`` if
        ``record``. The common case, edges made after ``t`` included, is one compiled call
        (:func:`kernels.search_one`), again on a wider fetch while too few visible rows were
        fetched, as :meth:`_pool` widens; counts out of time order (and unusable queries)
        take the general path (:meth:`_pool`, :meth:`rank`)."""
        c, log, n_rows = self.columns, self.counts, len(self.ids)
        access_k = min(k, n) if record else 0
        log.reserve(n_rows, access_k)
        params = self._kernel_params(weights)
        while True:
            code, ranked, sig, status, log_n, kept = kernels.search_one(
                q[0], first[0][0], first[1][0], first[2], t, c.block("f8"), c.block("i4"),
                lifecycle, n, fetch >= total, params, log.head, log.values, log.links,
                access_k, n_rows, log.n, *self.graph.relational_times)
            if code != 1:
                break
            fetch = _widened(fetch, n, kept, total)
            first = self._index_search(q, fetch)
        if code == 0:
            if access_k:  # (else the log is unchanged)
                log.n = log_n
                self._log_access(ranked[:access_k], t)
            return _result(self, t, n, ranked, sig, status)
        result = self.rank(self._pool(q, t, n, lifecycle, fetch, first), weights, n)
        if record:
            self.record_access(result.rows[:k], t)
        return result

    def rank(self, cand: Candidates, weights: ScoringWeights | None = None,
             pool: int | None = None) -> SearchResult:
        """Rank a candidate set by the four-signal score (ties: lower row first): the
        ranking step of :meth:`search`, for callers that bring their own candidates.

        Compiled (:mod:`smartvector.kernels`): the scores of :meth:`signals` and
        :func:`~smartvector.scoring.combine`, up to the last bit of exp2 and log1p."""
        pool = len(cand) if pool is None else pool
        t = cand.at
        if len(cand) == 0:
            e = np.empty(0)
            return SearchResult(self, t, pool, cand.rows, e, e, e, e, e, np.empty(0, np.int8))
        rows = np.ascontiguousarray(cand.rows, dtype=np.int64)
        sem = np.ascontiguousarray(cand.semantic, dtype=np.float64)
        c = self.columns
        late_ed = (bool((c["edges_changed_at"][rows] > t).any()) if cand.late is None
                   else cand.late[1])
        edges = self.relational_edges_at(rows, t) if late_ed else _NO_EDGES
        log, params = self.counts, self._kernel_params(weights)
        ranked, sig, status, ok = kernels.rank(rows, sem, t, c.block("f8"), c.block("i4"),
                                               _NO_COUNTS, edges, params, log.head,
                                               log.values, log.links)
        if not ok:  # a row's counting events came out of time order: replay its events
            ranked, sig, status, _ = kernels.rank(
                rows, sem, t, c.block("f8"), c.block("i4"), np.stack(self._counts_at(rows, t)),
                edges, params, log.head, log.values, log.links)
        return _result(self, t, pool, ranked, sig, status)

    def _kernel_params(self, weights: ScoringWeights | None) -> np.ndarray:
        """The scoring parameters packed for the kernels (cached per config and weights)."""
        cfg = self.config
        w = weights or cfg.weights
        key = (id(cfg), id(w))
        hit = self._params_cache.get(key)
        if hit is None or hit[0] is not cfg or hit[1] is not w:
            if len(self._params_cache) > 64:
                self._params_cache.clear()
            hit = self._params_cache[key] = (cfg, w, kernels.pack_params(
                cfg.temporal, cfg.confidence, cfg.relational, w))
        return hit[2]

    def query(
        self,
        text: str | None,
        at: TimeLike,
        k: int = 5,
        *,
        vector: np.ndarray | None = None,
        pool: int | None = None,
        weights: ScoringWeights | None = None,
        lifecycle: bool = True,
        record_access: bool | None = None,
    ) -> list[Hit]:
        """Top-``k`` vectors by the four-signal score, as the store was at ``at``: the first
        ``k`` hits of :meth:`search` (same arguments)."""
        return self.search(text, at, k, vector=vector, pool=pool, weights=weights,
                           lifecycle=lifecycle, record_access=record_access).hits(k)
