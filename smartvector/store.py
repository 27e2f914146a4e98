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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .chunking import text_hash
from .columns import Columns
from .confidence import ConfidenceEngine
from .config import ScoringWeights, StoreConfig
from .consolidation import consolidate
from .embedders import Embedder
from .graph import RELATIONAL_KINDS, EdgeGraph, ripple
from .index import VectorIndex, make_index
from .ingestion import DocState, Ingestion
from .scoring import combine, relational_signal, temporal_signal
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
_STATUS = tuple(Status)


@dataclass
class Candidates:
    """Rows retrieved for one query, with everything a ranking function needs."""

    rows: np.ndarray
    semantic: np.ndarray
    at: float
    store: SmartVectorStore = field(repr=False)

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
        self.events: dict[int, list[Event]] = {}
        self.docs: dict[str, DocState] = {}
        self.pending_ripple: list[int] = []
        self.last_consolidated: float = -np.inf

    # ------------------------------------------------------------------ basics
    def __len__(self) -> int:
        return len(self.ids)

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

        Over-fetches from the index and filters with numpy masks (created by ``at``, and with
        ``lifecycle``, not deprecated or archived at ``at``), widening the fetch until enough
        survive or the whole index has been seen. The first fetch is ``n`` divided by the share
        of rows visible at ``at`` (estimated on an evenly spaced sample of rows), with a
        margin, so that one index search is usually enough; a widening scales the fetch by
        the survival rate it saw.
        """
        t = to_ts(at)
        total = len(self.index)
        empty = np.empty(0, dtype=np.int64)
        if total == 0 or n <= 0:
            return Candidates(empty, np.empty(0), t, self)
        q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        c = self.columns
        share = self.visible_share(t, lifecycle)
        fetch = min(total, n if share >= 1 else int(n * _FETCH_MARGIN / max(share, 1 / 64)) + 1)
        while True:
            labels, sims = self.index.search(q, fetch)
            labels, sims = labels[0], sims[0]
            keep = c["created_at"][labels] <= t
            if lifecycle:
                keep &= ~(c["superseded_at"][labels] <= t)
            kept = int(np.count_nonzero(keep))
            if kept >= n or fetch >= total:
                # exactly the n nearest visible rows, however many were fetched: the pool
                # must not depend on how many invisible (future, deprecated) rows exist
                idx = np.flatnonzero(keep)[:n]
                return Candidates(labels[idx], sims[idx].astype(np.float64), t, self)
            grow = min(8.0, max(2.0, _FETCH_MARGIN * n / max(kept, 1)))
            fetch = min(total, int(fetch * grow) + 1)

    def visible_share(self, at: TimeLike, lifecycle: bool = True) -> float:
        """Estimated share of rows visible at ``at`` (created, and with ``lifecycle`` not
        deprecated), counted on at most ~1,000 evenly spaced rows: deterministic, ~10 us."""
        t = to_ts(at)
        c = self.columns
        step = max(1, len(c) // 1024)
        vis = c["created_at"][::step] <= t
        if lifecycle:
            vis &= ~(c["superseded_at"][::step] <= t)
        return float(np.count_nonzero(vis)) / max(len(vis), 1)

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
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        pool = self.config.pool if pool is None else pool
        if not isinstance(pool, int | np.integer) or isinstance(pool, bool) or pool < 1:
            raise ValueError(f"pool must be an int >= 1, got {pool!r}")
        if vector is None:
            if not text or not text.strip():
                raise ValueError("empty query text")
            vector = self.embed_query(text)
        cand = self.candidates(vector, at, int(pool), lifecycle)
        result = self.rank(cand, weights, int(pool))
        if self.config.record_access if record_access is None else record_access:
            self.record_access(result.rows[:k], cand.at)
        return result

    def rank(self, cand: Candidates, weights: ScoringWeights | None = None,
             pool: int | None = None) -> SearchResult:
        """Rank a candidate set by the four-signal score (ties: lower row first): the
        ranking step of :meth:`search`, for callers that bring their own candidates."""
        pool = len(cand) if pool is None else pool
        if len(cand) == 0:
            e = np.empty(0)
            return SearchResult(self, cand.at, pool, cand.rows, e, e, e, e, e,
                                np.empty(0, np.int8))
        sig = self.signals(cand)
        score = combine(weights or self.config.weights, **sig)
        order = np.lexsort((cand.rows, -score))
        rows = cand.rows[order]
        return SearchResult(
            self, cand.at, pool, rows, score[order],
            *(sig[name][order] for name in ("semantic", "temporal", "confidence", "relational")),
            self.status_at(rows, cand.at))

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
        c = self.columns
        np.add.at(c["accesses"], rows, 1)
        c["last_accessed"][rows] = t
        c["last_event_at"][rows] = np.maximum(c["last_event_at"][rows], t)
        ev = Event(t, "access")  # immutable: one object serves every row
        events = self.events
        for r in rows.tolist():
            events.setdefault(r, []).append(ev)

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

    def propagate(self, row: int, at: TimeLike) -> int:
        """Send a ripple from ``row`` along depended_by; returns how many were penalised."""
        t = to_ts(at)
        hits = ripple(self.graph, row, self.config.ripple, t)
        for dep, depth, pen in hits:
            self.penalise(dep, pen, t, "ripple",
                          f"from {self.ids[row]} at depth {depth}")
        return len(hits)

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
