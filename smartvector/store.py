"""The SmartVector store: time-travel retrieval through one ranking path (:meth:`search`),
feedback and inspection; ingestion (surgical updates) is :mod:`.ingestion`, persistence
:mod:`.persistence` and the sleep pass :mod:`.consolidation`.

Per-vector state lives in numpy columns (see :mod:`smartvector.columns`) so that scoring and
consolidation are vectorised; the embeddings live only in the index. Every operation takes
an explicit reference time ``at`` (POSIX seconds, a datetime or an ISO-8601 string); the
store never reads the wall clock. A query at time ``T`` sees the store as it was at ``T``:
vectors created later are absent, vectors superseded at or before ``T`` are deprecated, and
feedback, accesses, penalties and edges recorded after ``T`` do not count.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import kernels
from .chunking import text_hash
from .columns import Columns
from .confidence import ConfidenceEngine
from .config import ScoringWeights, StoreConfig
from .consolidation import consolidate
from .countlog import CountLog
from .embedders import Embedder
from .graph import RELATIONAL_KINDS, EdgeGraph, ripple
from .index import VectorIndex, make_index
from .ingestion import DocState, Ingestion
from .scoring import relational_signal, temporal_signal
from .timeutil import DAY, TimeLike, to_ts
from .vector import (
    ConsolidationReport,
    Edges,
    Event,
    Hit,
    SmartVector,
    Source,
    Status,
)

_FETCH_MARGIN = 1.25  # first fetch = n / (estimated visible share) * margin
_FLUSH_ACCESSES = 512  # searches whose access events are queued at most (see store.events)
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


class SmartVectorStore(Ingestion):
    """Self-aware vectors over a real embedding model and an ANN (or exact) index."""

    def __init__(
        self,
        embedder: Embedder,
        index: VectorIndex | str = "exact",
        config: StoreConfig | None = None,
    ) -> None:
        self.embedder = embedder
        self.index = make_index(index, embedder.dim) if isinstance(index, str) else index
        self.config = config or StoreConfig()
        self.engine = ConfidenceEngine(self.config.confidence)
        self.graph = EdgeGraph()
        self.columns = Columns()
        self.ids: list[str] = []
        self._row_of: dict[str, int] = {}
        self.texts: list[str] = []
        self.doc_of: list[str] = []
        self.source_of: list[tuple[str, str, str]] = []  # (type, name, author)
        self.meta_of: list[dict] = []
        self._events: dict[int, list[Event]] = {}
        self._pending_access: list[tuple[list[int], float]] = []  # see :attr:`events`
        self.counts = CountLog()  # the counting events' running totals (for time travel)
        self.docs: dict[str, DocState] = {}
        self.pending_ripple: list[int] = []
        self.last_consolidated: float = -np.inf
        self._params_cache: dict[tuple[int, int], tuple] = {}
        self._share_cache: dict[tuple[float, bool, int], float] = {}

    # ------------------------------------------------------------------ basics
    def __len__(self) -> int:
        return len(self.ids)

    @property
    def events(self) -> dict[int, list[Event]]:
        """Each vector's events (row -> list, oldest first).

        The access events of searches are first queued (a row list and a time per call:
        appending them to scattered lists while the query runs costs ~3 us of cache misses)
        and appended here, in order, whenever this is read or assigned (so before any other
        event) or after ``_FLUSH_ACCESSES`` calls."""
        if self._pending_access:
            self._flush_access()
        return self._events

    @events.setter
    def events(self, value: dict[int, list[Event]]) -> None:
        if self._pending_access:
            self._flush_access()
        self._events = value

    def _flush_access(self) -> None:
        """Append the queued access events (one immutable event serves every row of a call,
        and the next calls at the same time, but not at 0.0, which equals -0.0)."""
        events, pending, ev = self._events, self._pending_access, None
        self._pending_access = []
        for rows, t in pending:
            if ev is None or ev.at != t or not t:
                ev = Event(t, "access")
            for r in rows:
                evs = events.get(r)
                if evs is None:
                    events[r] = [ev]
                else:
                    evs.append(ev)

    def reindex_ids(self) -> None:
        """Rebuild the id -> row map from ``ids`` (after loading)."""
        self._row_of = {v: i for i, v in enumerate(self.ids)}

    def row(self, vector_id: str) -> int:
        try:
            return self._row_of[vector_id]
        except KeyError:
            raise KeyError(f"unknown vector id {vector_id!r}") from None

    def log(self, row: int, at: float, kind: str, delta: float = 0.0, detail: str = "") -> None:
        """Record an event on a vector (its lineage)."""
        self.events.setdefault(row, []).append(Event(at, kind, delta, detail))
        self.counts.add(row, at, kind, delta)

    # ------------------------------------------------------------ live state
    def status_at(self, rows: np.ndarray, at: TimeLike) -> np.ndarray:
        """Lifecycle status of ``rows`` at ``at`` (-1 where not yet created)."""
        t = to_ts(at)
        c = self.columns
        rows = np.asarray(rows, dtype=np.int64)
        st = np.full(len(rows), int(Status.UNCONSOLIDATED), dtype=np.int8)
        st[c["consolidated_at"][rows] <= t] = Status.ACTIVE
        st[c["dormant_at"][rows] <= t] = Status.DORMANT
        st[c["superseded_at"][rows] <= t] = Status.DEPRECATED
        st[c["archived_at"][rows] <= t] = Status.ARCHIVED
        st[~(c["created_at"][rows] <= t)] = -1
        return st

    def _counts_at(self, rows: np.ndarray, t: float) -> tuple[np.ndarray, ...]:
        """Feedback, access and penalty aggregates as they were at ``t``."""
        c = self.columns
        pos = c["positive"][rows].astype(np.float64)
        neg = c["negative"][rows].astype(np.float64)
        acc = c["accesses"][rows].astype(np.float64)
        pen = c["penalty"][rows].copy()
        late = np.flatnonzero(c["last_event_at"][rows] > t)
        events = self.events
        for i, r in zip(late.tolist(), rows[late].tolist(), strict=True):
            p = n = a = 0
            pe = 0.0
            for ev in events.get(r, ()):
                if ev.at > t:
                    continue
                kind = ev.kind
                if kind == "access":
                    a += 1
                elif kind == "accepted":
                    p += 1
                elif kind == "corrected":
                    n += 1
                elif kind == "ripple" or kind == "contradiction":
                    pe += -ev.delta
            pos[i], neg[i], acc[i], pen[i] = p, n, a, pe
        return pos, neg, acc, pen

    def confidence_at(self, rows: np.ndarray, at: TimeLike) -> np.ndarray:
        """Live confidence of ``rows`` at ``at`` (the confidence engine's closed form)."""
        t = to_ts(at)
        rows = np.asarray(rows, dtype=np.int64)
        c = self.columns
        pos, neg, acc, pen = self._counts_at(rows, t)
        if self.config.confidence.anchor == "validity":  # no decay while in force
            end = np.minimum(c["valid_to"][rows], self.ended_at(rows, t))
            age = np.maximum(t - end, 0.0) / DAY
        else:
            age = (t - c["created_at"][rows]) / DAY
        return self.engine.compute(c["base_confidence"][rows], age, pos, neg, acc, pen)

    def ended_at(self, rows: np.ndarray, at: TimeLike) -> np.ndarray:
        """When each row stopped being in force by ``at`` through the store's own events
        (superseded, or lost a contradiction); inf where neither happened by ``at``."""
        t = to_ts(at)
        c = self.columns
        sup, lost = c["superseded_at"][rows], c["lost_at"][rows]
        return np.minimum(np.where(sup <= t, sup, np.inf), np.where(lost <= t, lost, np.inf))

    def relational_edges_at(self, rows: np.ndarray, at: TimeLike) -> np.ndarray:
        """Number of depends_on + depended_by edges of ``rows`` made by ``at``."""
        t = to_ts(at)
        rows = np.asarray(rows, dtype=np.int64)
        n = self.columns["n_rel_edges"][rows].astype(np.int64)
        for i in np.flatnonzero(self.columns["edges_changed_at"][rows] > t):
            n[i] = self.graph.count(RELATIONAL_KINDS, int(rows[i]), t)
        return n

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

    # ------------------------------------------------------ reconsolidation
    def record_access(self, rows: Iterable[int], at: TimeLike) -> None:
        """Count a retrieval of each row at ``at`` (access reinforcement)."""
        t = to_ts(at)
        rows = np.fromiter((int(r) for r in rows), np.int64) if not isinstance(
            rows, np.ndarray) else rows.astype(np.int64).reshape(-1)
        c, log = self.columns, self.counts
        log.reserve(len(self), len(rows))
        n = kernels.record_access(rows, t, len(self), c.block("f8"), c.block("i4"), log.head,
                                  log.values, log.links, log.n)
        if n < 0:
            raise IndexError(f"row out of range for a store of {len(self)} vectors")
        log.n = n
        self._log_access(rows, t)

    def _log_access(self, rows: np.ndarray, t: float) -> None:
        """The access events of ``rows`` (their counts are already recorded): queued, see
        :attr:`events`."""
        if len(rows):
            pending = self._pending_access
            pending.append((rows.tolist(), t))  # (a copy: the caller may change ``rows``)
            if len(pending) >= _FLUSH_ACCESSES:
                self._flush_access()

    def feedback(self, vector_id: str, accepted: bool, at: TimeLike) -> float:
        """Record a user's acceptance or correction; returns the new live confidence."""
        t = to_ts(at)
        r = self.row(vector_id)
        c = self.columns
        if accepted:
            c["positive"][r] += 1
            c["last_validated"][r] = t
            self.log(r, t, "accepted", self.config.confidence.positive_boost)
        else:
            c["negative"][r] += 1
            self.log(r, t, "corrected", -self.config.confidence.negative_penalty)
        c["last_event_at"][r] = max(c["last_event_at"][r], t)
        return float(self.confidence_at(np.array([r]), t)[0])

    def penalise(self, row: int, amount: float, at: float, kind: str, detail: str) -> None:
        """Lower a vector's confidence by ``amount`` (a ripple or a lost contradiction)."""
        c = self.columns
        c["penalty"][row] += amount
        c["last_event_at"][row] = max(c["last_event_at"][row], at)
        self.log(row, at, kind, -amount, detail)

    def penalise_many(self, rows: np.ndarray, amounts: np.ndarray | float, at: float,
                      kind: str, details: Sequence[str]) -> None:
        """:meth:`penalise` of ``rows[i]`` by ``amounts[i]`` (or one amount for all) with
        ``details[i]``, for every ``i`` in turn, at once: the same columns, events (in the
        same order on each row) and count log. Consecutive events with the same amount and
        the same detail string object share one (immutable) event."""
        rows = np.asarray(rows, np.int64).reshape(-1)
        if len(rows) != len(details):
            raise ValueError(f"{len(rows)} rows but {len(details)} details")
        if not len(rows):
            return
        amounts = np.broadcast_to(np.asarray(amounts, np.float64), rows.shape)
        c = self.columns
        np.add.at(c["penalty"], rows, amounts)  # in the order of ``rows``, as += would
        last = c["last_event_at"]
        was = last[rows]  # (a row given twice gets the same value twice)
        last[rows] = np.where(at > was, at, was)  # max(last, at), as penalise takes it
        deltas = -amounts
        # an event equal to the one before (same delta, the same detail object) is shared
        same = np.zeros(len(rows), bool)
        same[1:] = (deltas[1:] == deltas[:-1]) & (np.signbit(deltas[1:])
                                                 == np.signbit(deltas[:-1]))
        events = self.events
        get = events.get
        ev = previous = None
        for r, d, detail, again in zip(rows.tolist(), deltas.tolist(), details, same.tolist(),
                                       strict=True):
            if not again or detail is not previous:
                ev, previous = Event(at, kind, d, detail), detail
            evs = get(r)
            if evs is None:
                events[r] = [ev]
            else:
                evs.append(ev)
        self.counts.add_many(rows, at, kind, deltas)

    def propagate(self, row: int, at: TimeLike) -> int:
        """Send a ripple from ``row`` along depended_by; returns how many were penalised."""
        t = to_ts(at)
        hits = ripple(self.graph, row, self.config.ripple, t)
        for dep, depth, pen in hits:
            self.penalise(dep, pen, t, "ripple",
                          f"from {self.ids[row]} at depth {depth}")
        return len(hits)

    def propagate_many(self, rows: Iterable[int], at: TimeLike) -> int:
        """:meth:`propagate` from each of ``rows`` in turn, at once (a ripple reads only the
        graph, which penalties leave alone); returns how many were penalised in all."""
        t = to_ts(at)
        graph, params, ids = self.graph, self.config.ripple, self.ids
        deps: list[int] = []
        pens: list[float] = []
        details: list[str] = []
        for row in rows:
            said: dict[int, str] = {}  # one detail string per depth (its events are shared)
            for dep, depth, pen in ripple(graph, row, params, t):
                deps.append(dep)
                pens.append(pen)
                detail = said.get(depth)
                if detail is None:
                    detail = said[depth] = f"from {ids[row]} at depth {depth}"
                details.append(detail)
        self.penalise_many(np.array(deps, np.int64), np.array(pens, np.float64), t, "ripple",
                           details)
        return len(deps)

    def consolidate(self, at: TimeLike) -> ConsolidationReport:
        """Run one consolidation ("sleep") pass at ``at``; see :mod:`.consolidation`."""
        return consolidate(self, to_ts(at))

    # ------------------------------------------------------------ inspection
    def get(self, vector_id: str, at: TimeLike | None = None) -> SmartVector:
        """A snapshot of one vector, as at ``at`` (default: its latest recorded time, i.e. its
        latest event or edge: edges made by other vectors' updates log no event on it)."""
        r = self.row(vector_id)
        c = self.columns
        evs = self.events.get(r, [])
        t = to_ts(at) if at is not None else max(
            max((e.at for e in evs), default=0.0), self.graph.last_time(r))
        rows = np.array([r])
        pos, neg, acc, _ = self._counts_at(rows, t)

        def ids(kind: str) -> tuple[str, ...]:
            return tuple(self.ids[o] for o in self.graph.neighbours(kind, r, t))

        st, name, author = self.source_of[r]
        la, lv = c["last_accessed"][r], c["last_validated"][r]
        return SmartVector(
            vector_id=vector_id, doc_id=self.doc_of[r], doc_version=int(c["doc_version"][r]),
            chunk_index=int(c["chunk_index"][r]), start=int(c["start"][r]),
            end=int(c["end"][r]), content=self.texts[r], content_hash=text_hash(self.texts[r]),
            embedding=self.index.get_vectors(rows)[0],
            source=Source(st, name, author, float(c["authority"][r])),
            created_at=float(c["created_at"][r]), updated_at=float(c["created_at"][r]),
            valid_from=float(c["valid_from"][r]),
            valid_to=float(min(c["valid_to"][r], c["superseded_at"][r])),
            base_confidence=float(c["base_confidence"][r]),
            confidence=float(self.confidence_at(rows, t)[0]),
            access_count=int(acc[0]), positive_feedback=int(pos[0]),
            negative_feedback=int(neg[0]),
            last_accessed=None if np.isnan(la) or la > t else float(la),
            last_validated=None if np.isnan(lv) or lv > t else float(lv),
            half_life_days=self.config.confidence.half_life_days,
            edges=Edges(ids("depends_on"), ids("depended_by"), ids("supersedes"),
                        ids("superseded_by"), ids("contradicts")),
            status=Status(int(self.status_at(rows, t)[0])) if c["created_at"][r] <= t
            else Status.UNCONSOLIDATED,
            meta=dict(self.meta_of[r]),
        )

    def history(self, vector_id: str) -> list[Event]:
        """Every event recorded on a vector, oldest first: why its confidence changed."""
        return list(self.events.get(self.row(vector_id), []))

    def lineage(self, vector_id: str) -> list[str]:
        """Ids of the vectors this one replaced, transitively, nearest first."""
        out: list[str] = []
        seen = {self.row(vector_id)}
        frontier = [self.row(vector_id)]
        while frontier:
            nxt = []
            for r in frontier:
                for o in self.graph.neighbours("supersedes", r):
                    if o not in seen:
                        seen.add(o)
                        out.append(self.ids[o])
                        nxt.append(o)
            frontier = nxt
        return out

    def document_text(self, doc_id: str) -> str:
        return self.docs[doc_id].text

    # ------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike) -> Path:
        """Write the whole store to one file, atomically (see :mod:`.persistence`)."""
        from .persistence import save_store

        return save_store(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike, embedder: Embedder) -> SmartVectorStore:
        """Read a store written by :meth:`save`; the embedder must be the one it was built with."""
        from .persistence import load_store

        return load_store(cls, path, embedder)
