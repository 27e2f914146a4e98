"""Ingestion: documents and their versions into the store, with surgical updates (a new
version re-embeds only the chunks it changed) and a bulk path for pre-embedded chunks.

:class:`Ingestion` is a mixin of :class:`~smartvector.store.SmartVectorStore`: it works on the
store's columns, ids, texts, events, documents and graph.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .chunking import Chunk, chunk_text, diff_chunks
from .graph import RELATIONAL_KINDS
from .index import VectorIndex
from .sources import default_authority
from .timeutil import TimeLike, to_ts
from .vector import Event, UpdateReport

_BLANK_LINE = re.compile(r"\n\s*\n")
_BULK_BLOCK = 65536  # rows per index insertion in add_vectors (bounds temporary copies)


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



class Ingestion:
    """Adding documents, versions and pre-embedded chunks (see the module docstring)."""

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
        self._share_cache.clear()  # the visible share changed (see store.visible_share)
        self.log(row, t, "deprecated", detail=why)

    def refresh_edge_counts(self, rows: Iterable[int], t: float) -> None:
        cols = self.columns
        for r in rows:
            n = self.graph.count(RELATIONAL_KINDS, r)
            if n != cols["n_rel_edges"][r]:
                cols["n_rel_edges"][r] = n
                cols["edges_changed_at"][r] = t

