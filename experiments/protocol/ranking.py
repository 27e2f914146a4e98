"""Ranking metrics per query, computed by the field's library (ir-measures, on trec_eval's
implementation through pytrec_eval) from TREC runs and the relevance labels.

A method's ranking becomes a TREC run of chunk ids (:class:`~experiments.protocol.labels.
ChunkCorpus`) whose scores are ``depth + 1 - rank``: strictly decreasing in the method's own
order, so trec_eval (which sorts by score and breaks ties by document id) keeps that order.
The method's raw scores stay in ``run.csv``. A query a method returns nothing for scores 0.

Two stages, per query:

- *document recall@k*: a chunk of one of the query's documents is in the top ``k``
  (``Success@k`` of the run collapsed to documents, each document at its first chunk's rank,
  against the document qrels);
- *version choice*: ``doc_rank``, the rank of the first chunk of one of the query's
  documents (0: none returned), and ``doc_hit_in_force``, whether that chunk is part of the
  version in force at ``asked_at``. *Version accuracy given the document* at ``k`` is the
  share of the queries with ``1 <= doc_rank <= k`` whose first such chunk is in force
  (:func:`experiments.protocol.evaluate.method_metrics`).

Chunk-level measures against the ``relevant`` qrels (chunks in force that state the answer):
nDCG@10, Recall@1/5/10 and MRR@10 (``RR@10``).
"""

from __future__ import annotations

from collections.abc import Iterable

import ir_measures
import pandas as pd
from ir_measures import RR, R, Success, nDCG

from experiments.protocol.labels import Labels
from experiments.protocol.replay import ReplayResult

CHUNK_MEASURES = {"ndcg_at_10": nDCG @ 10, "recall_at_1": R @ 1, "recall_at_5": R @ 5,
                  "recall_at_10": R @ 10, "mrr_at_10": RR @ 10}
DOC_MEASURES = {f"doc_recall_at_{k}": Success @ k for k in (1, 5, 10)}
#: the per-query columns :func:`per_query` adds to the predictions
COLUMNS = (*CHUNK_MEASURES, *DOC_MEASURES, "doc_rank", "doc_hit_in_force")


def chunk_run(result: ReplayResult, labels: Labels) -> dict[str, list[str]]:
    """Each query's ranked chunk ids (a chunk repeated in one ranking kept once, first)."""
    ids = labels.chunks.id_of
    return {q.id: list(dict.fromkeys(ids(h.doc_id, h.text) for h in r.hits))
            for q, r in result.run}


def as_trec(ranked: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Ranked ids as a run dict with scores ``depth + 1 - rank`` (see the module doc)."""
    return {qid: {d: float(len(ids) - i) for i, d in enumerate(ids)}
            for qid, ids in ranked.items() if ids}


def doc_run(ranked: dict[str, list[str]], labels: Labels) -> dict[str, list[str]]:
    """The chunk run collapsed to documents, each at its first chunk's rank."""
    doc = labels.chunks.document
    return {qid: list(dict.fromkeys(doc(c) for c in ids))
            for qid, ids in ranked.items()}


def run_lines(ranked: dict[str, list[str]], tag: str) -> Iterable[str]:
    """A run in TREC format: ``query Q0 chunk rank score tag``."""
    for qid, ids in ranked.items():
        for i, cid in enumerate(ids):
            yield f"{qid} Q0 {cid} {i + 1} {len(ids) - i} {tag}\n"


def _calc(measures: dict, qrels: dict[str, dict[str, int]],
          run: dict[str, dict[str, float]], qids: list[str]) -> dict[str, dict[str, float]]:
    """Per-query values of each measure (0 for a query missing from the run)."""
    names = {m: name for name, m in measures.items()}
    out = {name: dict.fromkeys(qids, 0.0) for name in measures}
    for m in ir_measures.iter_calc(list(measures.values()), qrels, run):
        out[names[m.measure]][m.query_id] = float(m.value)
    return out


def per_query(result: ReplayResult, labels: Labels) -> pd.DataFrame:
    """One row per query of ``result``'s run: the :data:`COLUMNS` (index: query id)."""
    ranked = chunk_run(result, labels)
    qids = [q.id for q, _ in result.run]
    by_q = labels.by_query
    qrels = {qid: dict.fromkeys(by_q[qid].relevant, 1) for qid in qids}
    doc_qrels = {qid: dict.fromkeys(by_q[qid].document, 1) for qid in qids}
    values = {**_calc(CHUNK_MEASURES, qrels, as_trec(ranked), qids),
              **_calc(DOC_MEASURES, doc_qrels, as_trec(doc_run(ranked, labels)), qids)}
    doc_rank, in_force = {}, {}
    for qid in qids:
        own = by_q[qid].document
        first = next(((i + 1, c) for i, c in enumerate(ranked[qid])
                      if labels.chunks.document(c) in own), (0, None))
        doc_rank[qid], in_force[qid] = first[0], first[1] in by_q[qid].in_force
    frame = pd.DataFrame({**values, "doc_rank": doc_rank, "doc_hit_in_force": in_force})
    return frame.loc[qids, list(COLUMNS)]
