"""Relevance labels at the question's time, and the checks that a query's labels can be right.

The *chunk corpus* is every distinct (document, chunk text) over all versions, chunked as the
harness chunks them (``chunk_text`` with the store's ``max_chunk_chars``). A chunk's id is
``<doc_id>#<n>``, ``n`` counting the document's distinct chunks from 1 in order of first
appearance (version order), with whitespace and ``#`` in the document id percent-encoded so
that ids fit the field's whitespace-separated formats. A chunk unchanged by an edit keeps its
id across versions, as it keeps its vector in a surgical store.

A document's *version in force* at time ``t`` is its last version with ``valid_from <= t``,
unless that version's ``valid_to <= t`` (then none is). A chunk is *in force* at ``t`` when
it is part of its document's version in force. For a query (its *own* documents are its
``doc_ids``), judged at its ``asked_at``:

- ``relevant``: own chunks in force that state the answer (the qrels of the ranking metrics);
- ``correct``: own chunks, of any version, that state the answer (the paper's top-1 grade);
- ``stale``: own chunks that state a stale answer and not the answer;
- ``contradicted``: chunks of injected documents that contradict an own document (all
  injected documents where the corpus does not say which they contradict);
- ``in_force``: own chunks in force (version choice: see :mod:`experiments.protocol.ranking`);
- ``document``: the own documents themselves (document-level qrels).

These are exactly the grades of :func:`experiments.protocol.grading.grade` for chunks of the
corpus. :func:`check_labels` lists the queries whose labels cannot be right; the job leaves
them out and counts them, as the loader does for unanswerable queries.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

from experiments.data.dataset import Dataset, Query
from experiments.protocol.answers import contains_answer, normalise
from smartvector.chunking import chunk_text, text_hash

#: the label sets written as TREC qrels (``qrels/<name>.txt``), in the order above
LABEL_SETS = ("relevant", "correct", "stale", "contradicted", "in_force", "document")
_SHOWN = 5


class LabelProblemWarning(UserWarning):
    """Some queries were left out because their relevance labels cannot be right."""


@dataclass
class ChunkCorpus:
    """The distinct chunks of a dataset and, per document, which chunks each version holds."""

    texts: dict[str, str] = field(default_factory=dict)  # chunk id -> text
    doc_of: dict[str, str] = field(default_factory=dict)  # chunk id -> document id
    ids: dict[tuple[str, str], str] = field(default_factory=dict)  # (doc, text) -> chunk id
    #: per document, its versions in order: (valid_from, valid_to or None, chunk ids)
    versions: dict[str, list[tuple[float, float | None, tuple[str, ...]]]] = field(
        default_factory=dict)
    #: injected documents: what each contradicts (None: unsaid) and its chunks
    injected: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    injected_chunks: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def build(cls, ds: Dataset, max_chunk_chars: int) -> ChunkCorpus:
        out = cls()
        counts: dict[str, int] = {}
        for v in ds.corpus:
            held = []
            for c in chunk_text(v.text, max_chunk_chars):
                key = (v.doc_id, c.text)
                if key not in out.ids:
                    counts[v.doc_id] = counts.get(v.doc_id, 0) + 1
                    cid = f"{quote(v.doc_id, safe='')}#{counts[v.doc_id]}"
                    out.ids[key], out.texts[cid], out.doc_of[cid] = cid, c.text, v.doc_id
                held.append(out.ids[key])
            out.versions.setdefault(v.doc_id, []).append(
                (v.ts, v.valid_to_ts, tuple(dict.fromkeys(held))))
            if v.injected:
                c = v.meta.get("contradicts")
                out.injected[v.doc_id] = None if c is None else tuple(c)
        for d in out.injected:
            out.injected_chunks[d] = out.chunks_of(d)
        return out

    def id_of(self, doc_id: str, text: str) -> str:
        """The id of a retrieved chunk; a text the harness's chunking never produced (a
        method that chunks its own way) gets an id of its own, relevant to nothing."""
        found = self.ids.get((doc_id, text))
        if found is not None:
            return found
        return f"{quote(doc_id, safe='')}#x{text_hash(text)[:12]}"

    def document(self, chunk_id: str) -> str:
        """The document of a chunk id (also of one :meth:`id_of` made for a foreign text)."""
        found = self.doc_of.get(chunk_id)
        return found if found is not None else unquote(chunk_id.rsplit("#", 1)[0])

    def in_force(self, doc_id: str, t: float) -> tuple[str, ...]:
        """The chunks of ``doc_id``'s version in force at ``t`` (none if none is)."""
        versions = self.versions[doc_id]
        i = bisect.bisect_right([v[0] for v in versions], t) - 1
        if i < 0 or (versions[i][1] is not None and versions[i][1] <= t):
            return ()
        return versions[i][2]

    def chunks_of(self, doc_id: str) -> list[str]:
        """Every distinct chunk of a document, in order of first appearance."""
        return list(dict.fromkeys(c for v in self.versions[doc_id] for c in v[2]))


@dataclass(frozen=True)
class QueryLabels:
    """One query's label sets (chunk ids; document ids for ``document``)."""

    relevant: frozenset[str]
    correct: frozenset[str]
    stale: frozenset[str]
    contradicted: frozenset[str]
    in_force: frozenset[str]
    document: frozenset[str]


def label_query(chunks: ChunkCorpus, q: Query) -> QueryLabels:
    """The label sets of one query at its ``asked_at``."""
    own = [c for d in q.doc_ids for c in chunks.chunks_of(d)]
    states = {c for c in own if contains_answer(chunks.texts[c], q.answer)}
    in_force = frozenset(c for d in q.doc_ids for c in chunks.in_force(d, q.ts))
    stale = frozenset(c for c in own if c not in states and any(
        contains_answer(chunks.texts[c], s) for s in q.stale_answers))
    mine = set(q.doc_ids)
    contradicted = frozenset(
        c for d, against in chunks.injected.items()
        if d not in mine and (against is None or not mine.isdisjoint(against))
        for c in chunks.injected_chunks[d])
    return QueryLabels(frozenset(states & in_force), frozenset(states), stale, contradicted,
                       in_force, frozenset(q.doc_ids))


def problem_of(chunks: ChunkCorpus, q: Query, labels: QueryLabels) -> str | None:
    """Why a query's labels cannot be right, or None. In this order: asked before any of
    its documents exists; its answer is also one of its stale answers; no chunk in force at
    ``asked_at`` states the answer (it only becomes true later, or no single chunk holds
    it); every chunk stating a stale answer also states the answer (a stale chunk would be
    graded correct)."""
    first = min(chunks.versions[d][0][0] for d in q.doc_ids)
    if q.ts < first:
        return "asked before any of its documents exists"
    answer = normalise(q.answer)
    if any(normalise(s) == answer for s in q.stale_answers):
        return f"its answer {q.answer!r} is also listed among its stale answers"
    if not labels.relevant:
        later = labels.correct - labels.in_force
        why = ("it is stated only by versions not in force then" if later else
               "no single chunk of its documents states it")
        return f"no chunk in force at asked_at states the answer {q.answer!r} ({why})"
    own = [c for d in q.doc_ids for c in chunks.chunks_of(d)]
    with_stale = [c for c in own if any(contains_answer(chunks.texts[c], s)
                                        for s in q.stale_answers)]
    if with_stale and not labels.stale:
        return ("every chunk stating a stale answer also states the answer (a stale chunk "
                "would be graded correct)")
    return None


@dataclass
class Labels:
    """Every kept query's labels, and the queries left out with their reasons."""

    chunks: ChunkCorpus
    by_query: dict[str, QueryLabels]
    problems: list[tuple[str, str]] = field(default_factory=list)


def label_dataset(ds: Dataset, max_chunk_chars: int) -> tuple[Dataset, Labels]:
    """The labels of every query, and the dataset without the queries whose labels cannot be
    right: those are warned about (one :class:`LabelProblemWarning` naming the first few)
    and moved to ``unanswerable``/``excluded`` with their reasons, so they are counted."""
    chunks = ChunkCorpus.build(ds, max_chunk_chars)
    by_query: dict[str, QueryLabels] = {}
    problems: list[tuple[str, str]] = []
    kept, dropped = [], []
    for q in ds.queries:
        labels = label_query(chunks, q)
        reason = problem_of(chunks, q, labels)
        if reason is None:
            by_query[q.id] = labels
            kept.append(q)
        else:
            problems.append((q.id, reason))
            dropped.append(q)
    if problems:
        shown = "; ".join(f"{qid}: {why}" for qid, why in problems[:_SHOWN])
        more = f" (+{len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
        where = ds.path or "dataset"
        warnings.warn(f"{where}: left out {len(problems)} of {len(ds.queries)} queries whose "
                      f"labels cannot be right: {shown}{more}", LabelProblemWarning,
                      stacklevel=2)
        ds = dataclasses.replace(ds, queries=kept, unanswerable=ds.unanswerable + problems,
                                 excluded=ds.excluded + dropped)
    return ds, Labels(chunks, by_query, problems)


# --- the field's formats -----------------------------------------------------------------


def qrels_lines(labels: Labels, name: str) -> Iterable[str]:
    """One label set as TREC qrels lines ``query 0 chunk 1`` (sorted)."""
    for qid in sorted(labels.by_query):
        for cid in sorted(getattr(labels.by_query[qid], name)):
            yield f"{qid} 0 {cid} 1\n"


def write_labels(out_dir: Path, ds: Dataset, labels: Labels) -> None:
    """``qrels/<set>.txt`` for every label set (TREC qrels) and a BEIR-style
    ``beir/{corpus.jsonl, queries.jsonl, qrels/test.tsv}`` (the relevant chunks)."""
    qdir, bdir = Path(out_dir) / "qrels", Path(out_dir) / "beir"
    qdir.mkdir(parents=True, exist_ok=True)
    (bdir / "qrels").mkdir(parents=True, exist_ok=True)
    for name in LABEL_SETS:
        (qdir / f"{name}.txt").write_text("".join(qrels_lines(labels, name)))
    c = labels.chunks
    (bdir / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": cid, "title": c.doc_of[cid], "text": c.texts[cid]},
                   ensure_ascii=False) + "\n" for cid in c.texts))
    (bdir / "queries.jsonl").write_text("".join(
        json.dumps({"_id": q.id, "text": q.text,
                    "metadata": {"asked_at": q.asked_at.isoformat(), "kind": q.kind}},
                   ensure_ascii=False) + "\n" for q in ds.queries))
    (bdir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{qid}\t{cid}\t1\n" for qid in sorted(labels.by_query)
        for cid in sorted(labels.by_query[qid].relevant)))
