"""The evaluation protocol: replay a dataset in time order through one method's store.

Each document version is ingested at its ``valid_from`` (later versions go through the
surgical-update path); consolidation runs at the first event of each later simulated day
after ingestions, and before a query when anything was ingested since the last pass; each
query is answered at its ``asked_at``, so it sees only what had been ingested by then.
Ingestions at the same instant as a query come first.

Retrieval writes a *run* (per query, the method's ranked hits); :func:`grade_run` grades it
afterwards, the same way for every method. Only a retriever that declares ``needs_gold``
(the references) is shown the gold query.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from experiments.data.dataset import Dataset, DocVersion, Query
from experiments.methods import QueryInput, RankedHit, Ranking, Retriever
from experiments.protocol.grading import Grade, grade
from smartvector.timeutil import DAY


@dataclass(frozen=True)
class Schedule:
    """When consolidation runs during a replay."""

    daily: bool = True
    before_queries: bool = True


@dataclass
class ReplayResult:
    method: str
    run: list[tuple[Query, Ranking]] = field(default_factory=list)
    feedback: dict[str, str] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    ingest_seconds: float = 0.0
    chunks_ingested: int = 0
    consolidations: int = 0
    n_vectors: int = 0


def timeline(dataset: Dataset) -> list[tuple[float, int, DocVersion | Query]]:
    """Every ingestion and query in time order (ingestions first at equal times)."""
    events: list[tuple[float, int, int, DocVersion | Query]] = []
    for i, d in enumerate(dataset.corpus):
        events.append((d.ts, 0, i, d))
    for i, q in enumerate(dataset.queries):
        events.append((q.ts, 1, i, q))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    return [(t, kind, obj) for t, kind, _, obj in events]


def feedback_chosen(seed: int, query_id: str, rate: float) -> bool:
    """Whether the simulated user gives feedback on this query: the same queries for every
    method (a hash of seed and query id), so methods stay paired."""
    if rate <= 0:
        return False
    h = hashlib.sha256(f"{seed}:{query_id}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64 < rate


def replay(dataset: Dataset, retriever: Retriever, query_vectors: Mapping[str, np.ndarray],
           **kw) -> ReplayResult:
    """One method's replay (see :func:`replay_shared`)."""
    return replay_shared(dataset, [retriever], query_vectors, **kw)[0]


def replay_shared(
    dataset: Dataset,
    retrievers: Sequence[Retriever],
    query_vectors: Mapping[str, np.ndarray],
    *,
    k: int = 5,
    schedule: Schedule = Schedule(),
    mode: str = "replay",
    feedback_rate: float = 0.0,
    seed: int = 0,
) -> list[ReplayResult]:
    """Replay the dataset once into the first retriever's state; every retriever answers
    every query from it (the others share that state: see
    :meth:`~experiments.methods.base.Retriever.state_key`). One result per retriever.

    ``mode="replay"`` answers each query when it is asked. ``mode="time_travel"`` ingests the
    whole corpus first (consolidating at the same points) and then asks every query "as of"
    its ``asked_at``: time-aware methods search at that time, time-blind ones see the final
    state. (Build the retriever's store with ``record_access=False`` for time travel.)
    ``feedback_rate`` (replay only, one retriever only) is the share of queries whose top-1
    answer the simulated user accepts (if correct) or corrects.
    """
    if mode not in ("replay", "time_travel"):
        raise ValueError(f"protocol.mode must be 'replay' or 'time_travel', got {mode!r}")
    if mode == "time_travel" and feedback_rate > 0:
        raise ValueError("feedback simulation needs protocol.mode=replay")
    if feedback_rate > 0 and len(retrievers) > 1:
        raise ValueError("feedback changes a method's state: it cannot share a replay")
    leader = retrievers[0]
    for r in retrievers[1:]:
        r.share_state(leader)
    results = [ReplayResult(r.name) for r in retrievers]
    main = results[0]
    injected = injected_docs(dataset)
    dirty_day: int | None = None
    pending: list[Query] = []
    end = -np.inf
    for t, kind, obj in timeline(dataset):
        end = max(end, t)
        day = int(t // DAY)
        if dirty_day is not None and schedule.daily and day != dirty_day:
            leader.consolidate(t)
            main.consolidations += 1
            dirty_day = None
        if kind == 0:
            t0 = time.perf_counter()
            main.chunks_ingested += leader.ingest(obj)
            main.ingest_seconds += time.perf_counter() - t0
            dirty_day = day
            continue
        if dirty_day is not None and schedule.before_queries:
            leader.consolidate(t)
            main.consolidations += 1
            dirty_day = None
        if mode == "time_travel":
            pending.append(obj)
            continue
        for r, res in zip(retrievers, results, strict=True):
            ranking = _answer(r, obj, query_vectors[obj.id], k, obj.ts, res)
            if feedback_chosen(seed, obj.id, feedback_rate) and ranking.hits:
                top = ranking.hits[0]
                ok = grade_hit(top, obj, injected) == Grade.CORRECT
                r.feedback(top, ok, obj.ts)
                res.feedback[obj.id] = "accepted" if ok else "corrected"
    for q in pending:
        for r, res in zip(retrievers, results, strict=True):
            _answer(r, q, query_vectors[q.id], k, q.ts if r.time_aware else end, res)
    for r, res in zip(retrievers, results, strict=True):
        res.n_vectors = r.size
        res.chunks_ingested, res.ingest_seconds = main.chunks_ingested, main.ingest_seconds
        res.consolidations = main.consolidations
    return results


def _answer(retriever: Retriever, q: Query, qvec: np.ndarray, k: int, at: float,
            result: ReplayResult) -> Ranking:
    qin = QueryInput(q.id, q.text, qvec, q.ts)
    t0 = time.perf_counter()
    ranking = retriever.search(qin, at, k, q if retriever.needs_gold else None)
    result.latencies_ms.append((time.perf_counter() - t0) * 1000.0)
    result.run.append((q, ranking))
    return ranking


def injected_docs(dataset: Dataset) -> dict[str, tuple[str, ...] | None]:
    """Injected documents (``meta.injected``), each with the documents it contradicts
    (``meta.contradicts``; None where the corpus does not say)."""
    out: dict[str, tuple[str, ...] | None] = {}
    for d in dataset.corpus:
        if d.injected:
            c = d.meta.get("contradicts")
            out[d.doc_id] = None if c is None else tuple(c)
    return out


def grade_hit(hit: RankedHit, q: Query, injected: dict[str, tuple[str, ...] | None]) -> Grade:
    """The shared grade of one retrieved hit for query ``q``."""
    return grade(hit.text, hit.doc_id, hit.doc_id in injected, q, injected.get(hit.doc_id))


def grade_run(dataset: Dataset, result: ReplayResult) -> list[dict]:
    """One prediction row per query: the top-1 hit, its grade and signals, the rank of the
    first correct hit, and whether the top-1 is an injected chunk."""
    injected = injected_docs(dataset)
    return [_prediction(injected, result.method, q, r, result.feedback.get(q.id, ""))
            for q, r in result.run]


def _prediction(injected: dict[str, tuple[str, ...] | None], method: str, q: Query,
                ranking: Ranking, feedback: str) -> dict:
    grades = [grade_hit(h, q, injected) for h in ranking.hits]
    first = next((i + 1 for i, g in enumerate(grades) if g == Grade.CORRECT), 0)
    row = {"query_id": q.id, "method": method, "kind": q.kind,
           "topic": str(q.meta.get("topic") or q.doc_ids[0]),
           "timing": str(q.meta.get("timing", "")), "split": str(q.meta.get("split", "")),
           "value_type": str(q.meta.get("value_type") or q.meta.get("field") or "")}
    if ranking.hits:
        h = ranking.hits[0]
        row.update(
            vector_id=h.vector_id, doc_id=h.doc_id, score=h.score,
            **{s: h.signals.get(s, np.nan)
               for s in ("semantic", "temporal", "confidence", "relational")},
            grade=grades[0].value, probability=ranking.probability,
            injected=h.doc_id in injected,
        )
    else:
        row.update(vector_id="", doc_id="", score=np.nan, semantic=np.nan, temporal=np.nan,
                   confidence=np.nan, relational=np.nan, grade=Grade.WRONG.value,
                   probability=0.0, injected=False)
    row["first_correct_rank"] = first
    row["feedback"] = feedback
    return row


def run_rows(result: ReplayResult) -> list[dict]:
    """The run in long form (one row per query and rank), for ``run.csv``."""
    return [{"query_id": q.id, "method": result.method, "rank": i + 1,
             "vector_id": h.vector_id, "doc_id": h.doc_id, "score": h.score}
            for q, r in result.run for i, h in enumerate(r.hits)]
