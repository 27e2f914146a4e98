"""The SmartVector store: its state, feedback, inspection and time travel; retrieval (one
ranking path, :meth:`search`) is :mod:`.query`, ingestion (surgical updates)
:mod:`.ingestion`, persistence :mod:`.persistence` and the sleep pass :mod:`.consolidation`.

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
from pathlib import Path

import numpy as np

from . import kernels
from .chunking import text_hash
from .columns import Columns
from .confidence import ConfidenceEngine
from .config import StoreConfig
from .consolidation import consolidate
from .countlog import CountLog
from .embedders import Embedder
from .graph import RELATIONAL_KINDS, EdgeGraph, ripple
from .index import VectorIndex, make_index
from .ingestion import DocState, Ingestion
from .query import Querying
from .timeutil import DAY, TimeLike, to_ts
from .vector import (
    ConsolidationReport,
    Edges,
    Event,
    SmartVector,
    Source,
    Status,
)

_FLUSH_ACCESSES = 512  # searches whose access events are queued at most (see store.events)

class SmartVectorStore(Ingestion, Querying):
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
