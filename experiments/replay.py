"""The evaluation protocol: replay a dataset in time order through one method's store.

Each document version is ingested at its ``valid_from`` (later versions go through the
surgical-update path); consolidation runs at the first event of each later simulated day
after ingestions, and before a query when anything was ingested since the last pass; each
query is answered at its ``asked_at``, so it sees only what had been ingested by then.
Ingestions at the same instant as a query come first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from smartvector import SmartVectorStore, StoreConfig
from smartvector.embedders import Embedder
from smartvector.timeutil import DAY

from .dataset import Dataset, DocVersion, Query
from .grading import Grade, grade
from .methods import Method


@dataclass(frozen=True)
class Schedule:
    """When consolidation runs during a replay."""

    daily: bool = True
    before_queries: bool = True


@dataclass
class ReplayResult:
    method: str
    predictions: list[dict] = field(default_factory=list)
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


def ingest(store: SmartVectorStore, d: DocVersion) -> int:
    """Add one document version to the store; returns chunks embedded."""
    rep = store.add_document(
        d.doc_id, d.text, d.ts, version=d.version, source_type=d.source_type,
        authority=d.authority, author=d.author, valid_to=d.valid_to_ts,
        depends_on=d.depends_on, meta=d.meta,
    )
    return rep.n_reembedded


def feedback_chosen(seed: int, query_id: str, rate: float) -> bool:
    """Whether the simulated user gives feedback on this query: the same queries for every
    method (a hash of seed and query id), so methods stay paired."""
    if rate <= 0:
        return False
    h = hashlib.sha256(f"{seed}:{query_id}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64 < rate


def replay(
    dataset: Dataset,
    method: Method,
    embedder: Embedder,
    query_vectors: Mapping[str, np.ndarray],
    *,
    store_config: StoreConfig | None = None,
    index: str = "exact",
    k: int = 5,
    schedule: Schedule = Schedule(),
    mode: str = "replay",
    feedback_rate: float = 0.0,
    seed: int = 0,
) -> ReplayResult:
    """Run one method over the dataset; one prediction row per query.

    ``mode="replay"`` answers each query when it is asked. ``mode="time_travel"`` ingests the
    whole corpus first (consolidating at the same points) and then asks every query "as of"
    its ``asked_at``: time-aware methods query the store at that time, time-blind ones see
    the final store; accesses are not recorded. ``feedback_rate`` (replay only) is the share
    of queries whose top-1 answer the simulated user accepts (if correct) or corrects.
    """
    if mode not in ("replay", "time_travel"):
        raise ValueError(f"protocol.mode must be 'replay' or 'time_travel', got {mode!r}")
    if mode == "time_travel":
        if feedback_rate > 0:
            raise ValueError("feedback simulation needs protocol.mode=replay")
        store_config = dataclasses.replace(store_config or StoreConfig(), record_access=False)
    store = SmartVectorStore(embedder, index, store_config)
    result = ReplayResult(method.name)
    dirty_day: int | None = None
    pending: list[Query] = []
    end = -np.inf
    for t, kind, obj in timeline(dataset):
        end = max(end, t)
        day = int(t // DAY)
        if dirty_day is not None and schedule.daily and day != dirty_day:
            store.consolidate(t)
            result.consolidations += 1
            dirty_day = None
        if kind == 0:
            t0 = time.perf_counter()
            result.chunks_ingested += ingest(store, obj)
            result.ingest_seconds += time.perf_counter() - t0
            dirty_day = day
            continue
        if dirty_day is not None and schedule.before_queries:
            store.consolidate(t)
            result.consolidations += 1
            dirty_day = None
        if mode == "time_travel":
            pending.append(obj)
            continue
        _answer(store, method, obj, query_vectors[obj.id], k, obj.ts, result)
        if feedback_chosen(seed, obj.id, feedback_rate) and result.predictions[-1]["vector_id"]:
            pred = result.predictions[-1]
            store.feedback(pred["vector_id"], pred["grade"] == Grade.CORRECT.value, obj.ts)
            pred["feedback"] = "accepted" if pred["grade"] == Grade.CORRECT.value else "corrected"
    for q in pending:
        _answer(store, method, q, query_vectors[q.id], k, q.ts if method.time_aware else end,
                result)
    result.n_vectors = len(store)
    return result


def _answer(store: SmartVectorStore, method: Method, q: Query, qvec: np.ndarray, k: int,
            at: float, result: ReplayResult) -> None:
    t0 = time.perf_counter()
    ranked = method.rank(store, qvec, q, k, at)
    result.latencies_ms.append((time.perf_counter() - t0) * 1000.0)
    result.predictions.append(_prediction(store, method.name, q, ranked))


def _prediction(store: SmartVectorStore, method: str, q: Query, ranked) -> dict:
    grades = [
        grade(store.texts[r], store.doc_of[r], bool(store.meta_of[r].get("injected", False)), q)
        for r in ranked.rows.tolist()
    ]
    first = next((i + 1 for i, g in enumerate(grades) if g == Grade.CORRECT), 0)
    row = {"query_id": q.id, "method": method, "kind": q.kind}
    if len(ranked.rows):
        r = int(ranked.rows[0])
        row.update(
            vector_id=store.ids[r], doc_id=store.doc_of[r], score=float(ranked.score[0]),
            **{s: float(ranked.signals[s][0])
               for s in ("semantic", "temporal", "confidence", "relational")},
            grade=grades[0].value, probability=ranked.probability,
        )
    else:
        row.update(vector_id="", doc_id="", score=np.nan, semantic=np.nan, temporal=np.nan,
                   confidence=np.nan, relational=np.nan, grade=Grade.WRONG.value,
                   probability=0.0)
    row["first_correct_rank"] = first
    row["feedback"] = ""
    return row
