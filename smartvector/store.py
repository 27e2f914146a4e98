"""The SmartVector store: ingestion with surgical updates, time-travel retrieval, feedback.

Per-vector state lives in numpy columns (see :mod:`smartvector.columns`) so that scoring and
consolidation are vectorised; the embeddings live only in the index. Every operation takes
an explicit reference time ``at`` (POSIX seconds, a datetime or an ISO-8601 string); the
store never reads the wall clock. A query at time ``T`` sees the store as it was at ``T``:
vectors created later are absent, vectors superseded at or before ``T`` are deprecated, and
feedback, accesses, penalties and edges recorded after ``T`` do not count.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .chunking import Chunk, chunk_text, diff_chunks, text_hash
from .columns import Columns
from .confidence import ConfidenceEngine
from .config import ScoringWeights, StoreConfig
from .consolidation import consolidate
from .embedders import Embedder
from .graph import RELATIONAL_KINDS, EdgeGraph, ripple
from .index import VectorIndex, make_index
from .scoring import combine, relational_signal, temporal_signal
from .sources import default_authority
from .timeutil import DAY, TimeLike, to_ts
from .vector import (
    ConsolidationReport,
    Edges,
    Event,
    Hit,
    SmartVector,
    Source,
    Status,
    UpdateReport,
)

_BLANK_LINE = re.compile(r"\n\s*\n")
_BULK_BLOCK = 65536  # rows per index insertion in add_vectors (bounds temporary copies)
_FETCH_MARGIN = 1.25  # first fetch = n / (estimated visible share) * margin
_STATUS = tuple(Status)


class _PendingAdds:
    """Stands in for the index while :meth:`SmartVectorStore.add_vectors` runs: ``add`` calls
    are collected and inserted in order at the end, in large batches (hnswlib inserts a batch
    on all its threads, a few vectors on one)."""

    def __init__(self, index: VectorIndex) -> None:
        self.index, self.dim = index, index.dim
        self.labels: list[np.ndarray] = []
        self.vectors: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self.index) + sum(map(len, self.labels))

    def add(self, labels: np.ndarray, vectors: np.ndarray) -> None:
        self.labels.append(np.asarray(labels, dtype=np.int64).reshape(-1))
        self.vectors.append(np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim))

    def flush(self) -> None:
        if not self.labels:
            return
        labels, vectors = np.concatenate(self.labels), np.concatenate(self.vectors)
        self.labels, self.vectors = [], []
        for b in range(0, len(labels), _BULK_BLOCK):
            self.index.add(labels[b:b + _BULK_BLOCK], vectors[b:b + _BULK_BLOCK])


def _per_row(value, n: int, name: str) -> list:
    """``value`` as a list of ``n`` items: a scalar repeated, or a sequence of length ``n``."""
    if value is None or isinstance(value, str | int | float | np.integer | np.floating):
        return [value] * n
    out = list(value)
    if len(out) != n:
        raise ValueError(f"{name}: {len(out)} values for {n} rows")
    return out


@dataclass
class DocState:
    """The current version of one document."""

    version: int
    text: str
    rows: list[int]
    chunks: list[Chunk]
    updated_at: float
    depends_on: tuple[str, ...] = ()
    source_type: str = "unknown"
    authority: float = 0.2


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


class SmartVectorStore:
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

    # --------------------------------------------------------------- ingestion
    def add_document(
        self,
        doc_id: str,
        text: str,
        at: TimeLike,
        *,
        version: int | None = None,
        source_type: str | None = None,
        source_name: str | None = None,
        authority: float | None = None,
        author: str = "",
        valid_from: TimeLike | None = None,
        valid_to: TimeLike | None = None,
        depends_on: Iterable[str] = (),
        meta: dict | None = None,
        embeddings: np.ndarray | None = None,
    ) -> UpdateReport:
        """Ingest a document, or a new version of one (a surgical update).

        Without ``source_type`` (and ``authority``), a new version keeps the document's.
        A new version is diffed chunk by chunk against the current one: untouched chunks
        keep their vectors, touched ones are deprecated and superseded by freshly embedded
        replacements that inherit their dependency edges and are queued for a ripple.
        ``embeddings`` (optional) are precomputed embeddings, one row per chunk of ``text``
        as :func:`~smartvector.chunking.chunk_text` cuts it; then the embedder is not called
        and only the rows of chunks that need a vector are used.
        """
        t = to_ts(at)
        doc = self.docs.get(doc_id)
        if doc is not None and t < doc.updated_at:
            raise ValueError(
                f"document {doc_id!r}: update at {t} is earlier than its last version "
                f"at {doc.updated_at}; ingest versions in time order"
            )
        version = version if version is not None else (doc.version + 1 if doc else 1)
        chunks = chunk_text(text, self.config.max_chunk_chars)
        if not chunks:
            raise ValueError(f"document {doc_id!r} version {version}: no text to embed")
        if source_type is None:  # an update keeps its document's source unless told
            source_type = doc.source_type if doc is not None else "unknown"
            if authority is None and doc is not None:
                authority = doc.authority
        auth = default_authority(source_type) if authority is None else float(authority)
        vf = t if valid_from is None else to_ts(valid_from)
        vt = np.inf if valid_to is None else to_ts(valid_to)
        if not vt > vf:
            raise ValueError(f"document {doc_id!r} version {version}: valid_to <= valid_from")
        if embeddings is not None:
            embeddings = np.asarray(embeddings, dtype=np.float32)
            if embeddings.shape != (len(chunks), self.index.dim):
                raise ValueError(f"document {doc_id!r}: {len(chunks)} chunks need embeddings of "
                                 f"shape ({len(chunks)}, {self.index.dim}), "
                                 f"got {embeddings.shape}")
        report = UpdateReport(doc_id, version, len(chunks), 0)

        if doc is None:
            old_rows: list[int] = []
            kept: list[tuple[int, int]] = []
            runs: list[tuple[list[int], list[int]]] = [([], list(range(len(chunks))))]
            removed: list[int] = []
        else:
            diff = diff_chunks(doc.chunks, chunks)
            old_rows = doc.rows
            kept = diff.kept
            runs = list(diff.replaced) + [([], [j]) for j in diff.added]
            removed = diff.removed
            if kept and float(self.columns["valid_to"][old_rows].min()) < vf:
                # a gap between the old version's end and this one's start: an unchanged
                # chunk cannot simply stay (its one window would cover the gap), so it is
                # replaced like a changed one (re-embedded, superseding the old vector)
                runs += [([i], [j]) for i, j in kept]
                kept = []

        new_idx = sorted(j for _, news in runs for j in news)
        new_rows = self._append_chunks(
            doc_id, version, [chunks[j] for j in new_idx], t, vf, vt,
            (source_type, source_name or doc_id, author), auth, meta or {},
            None if embeddings is None else embeddings[new_idx],
        )
        row_for = dict(zip(new_idx, new_rows, strict=True))
        rows = [-1] * len(chunks)
        for j, r in row_for.items():
            rows[j] = r
        cols = self.columns
        for i, j in kept:
            r = old_rows[i]
            rows[j] = r
            cols["chunk_index"][r], cols["start"][r], cols["end"][r] = (
                j, chunks[j].start, chunks[j].end)
            cols["valid_to"][r] = vt
        touched: set[int] = set()
        for olds, news in runs:
            for i in olds:
                old = old_rows[i]
                self._deprecate(old, t, f"superseded by version {version}")
                report.deprecated.append(self.ids[old])
                for j in news:
                    new = row_for[j]
                    self.graph.link_supersedes(new, old, t)
                    for target in self.graph.neighbours("depends_on", old):
                        self.graph.link_dependency(new, target, t)
                    for dep in self.graph.neighbours("depended_by", old):
                        self.graph.link_dependency(dep, new, t)
                    self.log(new, t, "supersedes", detail=self.ids[old])
                    touched.update(self.graph.neighbours("depends_on", new))
                    touched.update(self.graph.neighbours("depended_by", new))
                    touched.add(new)
            if olds:
                self.pending_ripple.extend(row_for[j] for j in news)
        for i in removed:
            self._deprecate(old_rows[i], t, f"removed in version {version}")
            report.deprecated.append(self.ids[old_rows[i]])
        self.refresh_edge_counts(touched, t)

        self.docs[doc_id] = DocState(
            version, text, rows, chunks, t, tuple(depends_on), source_type, auth)
        report.added = [self.ids[r] for r in new_rows]
        report.n_reembedded = len(new_rows)
        report.kept = len(kept)
        return report

    def add_vectors(
        self,
        embeddings: np.ndarray,
        texts: Sequence[str],
        doc_ids: Sequence[str],
        at: TimeLike,
        *,
        versions: int | Sequence[int] | None = None,
        source_type: str | Sequence[str] | None = None,
        authority: float | Sequence[float] | None = None,
        author: str = "",
        valid_from: TimeLike | None = None,
        valid_to: TimeLike | None = None,
        depends_on: Mapping[str, Iterable[str]] | None = None,
        meta: dict | None = None,
    ) -> list[UpdateReport]:
        """Bulk ingestion of pre-chunked, pre-embedded documents, all at time ``at``.

        Row ``i`` is chunk ``texts[i]`` of document ``doc_ids[i]``, embedded as
        ``embeddings[i]``. A document's rows are contiguous and in chunk order, a document
        appears once per call, and each text is one chunk as :func:`chunk_text` cuts it (one
        paragraph: no blank line, no surrounding whitespace, at most ``max_chunk_chars``
        characters); the document's text is its chunks joined by blank lines. ``versions``,
        ``source_type`` and ``authority`` are one value for every row or one per row
        (constant within a document); ``depends_on`` maps a doc id to the documents it
        depends on.

        The store ends exactly as if :meth:`add_document` had been called once per document,
        in order, with ``embeddings=`` its rows (so a document already in the store gets a
        surgical update: unchanged chunks keep their vectors), but runs of new documents are
        added in bulk: columns, ids, events and the index are filled in one go. Everything is
        validated before anything changes. Returns one :class:`UpdateReport` per document.
        """
        t = to_ts(at)
        texts = list(texts)
        n = len(texts)
        emb = np.asarray(embeddings, dtype=np.float32)
        if emb.shape != (n, self.index.dim):
            raise ValueError(f"{n} texts need embeddings of shape ({n}, {self.index.dim}), "
                             f"got {emb.shape}")
        doc_ids = list(doc_ids)
        if len(doc_ids) != n:
            raise ValueError(f"{len(doc_ids)} doc ids for {n} texts")
        vers = _per_row(versions, n, "versions")
        stypes = _per_row(source_type, n, "source_type")
        auths = _per_row(authority, n, "authority")
        deps = depends_on or {}
        vf = t if valid_from is None else to_ts(valid_from)
        vt = np.inf if valid_to is None else to_ts(valid_to)
        if not vt > vf:
            raise ValueError("valid_to <= valid_from")
        max_chars = self.config.max_chunk_chars
        for i, text in enumerate(texts):
            if (not isinstance(text, str) or not text or text != text.strip()
                    or len(text) > max_chars or _BLANK_LINE.search(text)):
                raise ValueError(f"row {i} ({doc_ids[i]!r}): text is not one chunk (empty, "
                                 f"surrounding whitespace, a blank line or over {max_chars} "
                                 "characters)")
        norms = np.linalg.norm(emb.astype(np.float64), axis=1) if n else np.empty(0)
        bad = np.flatnonzero(~np.isfinite(norms) | (norms == 0))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"row {i} ({doc_ids[i]!r}): embedding is zero or not finite")
        # documents: contiguous runs of one doc id
        starts = [0] + [i for i in range(1, n) if doc_ids[i] != doc_ids[i - 1]] if n else []
        bounds = list(zip(starts, starts[1:] + [n], strict=True)) if n else []
        if len({doc_ids[s] for s in starts}) != len(starts):
            raise ValueError("a document's rows must be contiguous and appear once per call")
        groups = []  # (doc_id, start, end, version, source_type, authority)
        for s, e in bounds:
            d = doc_ids[s]
            for name, vals in (("versions", vers), ("source_type", stypes),
                               ("authority", auths)):
                if any(v != vals[s] for v in vals[s + 1:e]):
                    raise ValueError(f"document {d!r}: {name} differ between its rows")
            doc = self.docs.get(d)
            version = vers[s] if vers[s] is not None else (doc.version + 1 if doc else 1)
            if doc is not None:
                if t < doc.updated_at:
                    raise ValueError(
                        f"document {d!r}: update at {t} is earlier than its last version "
                        f"at {doc.updated_at}; ingest versions in time order")
                if any(f"{d}@v{version}#{j}" in self._row_of for j in range(e - s)):
                    raise ValueError(f"document {d!r}: version {version} exists already")
            groups.append((d, s, e, int(version), stypes[s], auths[s]))

        reports: list[UpdateReport] = []
        run: list[tuple] = []
        index = self.index
        self.index = pending = _PendingAdds(index)  # type: ignore[assignment]
        try:
            for g in groups:
                if g[0] in self.docs:
                    reports.extend(self._add_new_documents(run, texts, emb, t, vf, vt, author,
                                                           deps, meta))
                    run = []
                    d, s, e, version, st, auth = g
                    reports.append(self.add_document(
                        d, "\n\n".join(texts[s:e]), t, version=version, source_type=st,
                        authority=auth, author=author, valid_from=vf, valid_to=vt,
                        depends_on=deps.get(d, ()), meta=meta, embeddings=emb[s:e]))
                else:
                    run.append(g)
            reports.extend(self._add_new_documents(run, texts, emb, t, vf, vt, author, deps,
                                                   meta))
        finally:
            self.index = index
            pending.flush()
        return reports

    def _add_new_documents(self, groups: list[tuple], texts: Sequence[str], emb: np.ndarray,
                           t: float, vf: float, vt: float, author: str,
                           deps: Mapping[str, Iterable[str]],
                           meta: dict | None) -> list[UpdateReport]:
        """The bulk path of :meth:`add_vectors`: documents not yet in the store."""
        if not groups:
            return []
        sel = np.concatenate([np.arange(s, e) for _, s, e, *_ in groups])
        rows = self.columns.append(len(sel))
        self.index.add(rows, emb[sel])
        cols = self.columns
        sizes = np.array([e - s for _, s, e, *_ in groups])
        chunk_index = sel - np.repeat([s for _, s, *_ in groups], sizes)
        lengths = np.fromiter((len(texts[i]) for i in sel.tolist()), np.int64, len(sel))
        ends = np.cumsum(lengths + 2) - 2
        first = np.cumsum(sizes) - sizes  # position of each document's first row in sel
        ends -= np.repeat(ends[first] - lengths[first], sizes)  # offsets within each document
        starts = ends - lengths
        cols["doc_version"][rows] = np.repeat([g[3] for g in groups], sizes)
        cols["chunk_index"][rows] = chunk_index
        cols["start"][rows] = starts
        cols["end"][rows] = ends
        cols["created_at"][rows] = t
        cols["valid_from"][rows] = vf
        cols["valid_to"][rows] = vt
        auth = np.repeat([default_authority("unknown" if st is None else st) if a is None
                          else float(a) for *_, st, a in groups], sizes)
        cols["authority"][rows] = auth
        cols["base_confidence"][rows] = auth
        reports = []
        starts_l, ends_l, idx_l = starts.tolist(), ends.tolist(), chunk_index.tolist()
        r0 = int(rows[0])
        pos = 0
        for (d, s, e, version, st, _), a in zip(groups, auth[first].tolist(), strict=True):
            st = "unknown" if st is None else st
            source = (st, d, author)
            m = meta or {}
            doc_texts = texts[s:e]
            chunks = []
            ids = []
            for k, text in enumerate(doc_texts):
                j = idx_l[pos + k]
                r = r0 + pos + k
                vid = f"{d}@v{version}#{j}"
                ids.append(vid)
                self._row_of[vid] = r
                self.events[r] = [Event(t, "created", 0.0, f"{d} v{version} chunk {j}")]
                chunks.append(Chunk(j, starts_l[pos + k], ends_l[pos + k], text))
            self.ids.extend(ids)
            self.texts.extend(doc_texts)
            self.doc_of.extend([d] * (e - s))
            self.source_of.extend([source] * (e - s))
            self.meta_of.extend([m] * (e - s))
            doc_rows = list(range(r0 + pos, r0 + pos + e - s))
            self.docs[d] = DocState(version, "\n\n".join(doc_texts), doc_rows, chunks, t,
                                tuple(deps.get(d, ())), st, a)
            reports.append(UpdateReport(d, version, e - s, e - s, added=ids))
            pos += e - s
        return reports

    def _append_chunks(
        self,
        doc_id: str,
        version: int,
        chunks: Sequence[Chunk],
        t: float,
        vf: float,
        vt: float,
        source: tuple[str, str, str],
        authority: float,
        meta: dict,
        emb: np.ndarray | None = None,
    ) -> list[int]:
        if not chunks:
            return []
        ids = [f"{doc_id}@v{version}#{c.index}" for c in chunks]
        for vid in ids:
            if vid in self._row_of:
                raise ValueError(f"vector {vid!r} exists already (repeated doc version?)")
        if emb is None:
            emb = self.embedder.encode([c.text for c in chunks])
        emb = np.asarray(emb, dtype=np.float32)
        if emb.shape != (len(chunks), self.index.dim):  # check before changing anything
            raise ValueError(f"{self.embedder.name} returned shape {emb.shape} for "
                             f"{len(chunks)} texts, expected ({len(chunks)}, {self.index.dim})")
        norms = np.linalg.norm(emb, axis=1)
        for vid, n in zip(ids, norms, strict=True):
            if not np.isfinite(n) or n == 0:
                raise ValueError(f"vector {vid!r}: embedding is zero or not finite")
        rows = self.columns.append(len(chunks))
        self.index.add(rows, emb)
        cols = self.columns
        cols["doc_version"][rows] = version
        cols["chunk_index"][rows] = [c.index for c in chunks]
        cols["start"][rows] = [c.start for c in chunks]
        cols["end"][rows] = [c.end for c in chunks]
        cols["created_at"][rows] = t
        cols["valid_from"][rows] = vf
        cols["valid_to"][rows] = vt
        cols["authority"][rows] = authority
        cols["base_confidence"][rows] = authority
        for vid, r, c in zip(ids, rows, chunks, strict=True):
            self.ids.append(vid)
            self._row_of[vid] = int(r)
            self.texts.append(c.text)
            self.doc_of.append(doc_id)
            self.source_of.append(source)
            self.meta_of.append(meta)
            self.log(int(r), t, "created", detail=f"{doc_id} v{version} chunk {c.index}")
        return [int(r) for r in rows]

    def _deprecate(self, row: int, t: float, why: str) -> None:
        if self.columns["superseded_at"][row] <= t:
            return
        self.columns["superseded_at"][row] = t
        self.log(row, t, "deprecated", detail=why)

    def refresh_edge_counts(self, rows: Iterable[int], t: float) -> None:
        cols = self.columns
        for r in rows:
            n = self.graph.count(RELATIONAL_KINDS, r)
            if n != cols["n_rel_edges"][r]:
                cols["n_rel_edges"][r] = n
                cols["edges_changed_at"][r] = t

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
