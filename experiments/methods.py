"""Retrieval methods compared by the harness: plain cosine, SmartVector and its ablations,
and stronger baselines. Every method ranks the candidates of one shared store API.

Each method maps its top-1 score to a probability of being correct for calibration:
the score clipped to [0, 1] (cosine for cosine-ranked methods, the four-signal score for
SmartVector variants), except ``time_weighted`` whose score (cosine + recency, up to 2) is
halved first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from smartvector import ScoringWeights, SmartVectorStore, Status
from smartvector.scoring import combine

from .dataset import Query
from .grading import contains_answer

FULL = ScoringWeights()


@dataclass(frozen=True)
class Ranked:
    """A method's top-k for one query, with the four signals of each hit."""

    rows: np.ndarray
    score: np.ndarray
    signals: dict[str, np.ndarray]
    probability: float


@dataclass(frozen=True)
class Method:
    """A named retrieval method; ``rank(store, query_vector, query, k, at)`` runs on the
    method's own replayed store. A time-blind method (``time_aware=False``) has no notion of
    the time a question is about: in the time-travel protocol it sees the final store."""

    name: str
    description: str
    rank: Callable[[SmartVectorStore, np.ndarray, Query, int, float], Ranked]
    time_aware: bool = True


def _top(store, cand, score, k, prob_scale=1.0) -> Ranked:
    if len(cand) == 0:
        return Ranked(np.empty(0, np.int64), np.empty(0), {}, float("nan"))
    sig = store.signals(cand)
    order = np.lexsort((cand.rows, -score))[:k]
    return Ranked(cand.rows[order], score[order], {n: v[order] for n, v in sig.items()},
                  float(np.clip(score[order[0]] / prob_scale, 0.0, 1.0)))


def _cosine(lifecycle: bool):
    def rank(store, qvec, query, k, at):
        cand = store.candidates(qvec, at, k * store.config.overfetch, lifecycle)
        return _top(store, cand, cand.semantic, k)
    return rank


def _four_signal(weights: ScoringWeights):
    def rank(store, qvec, query, k, at):
        cand = store.candidates(qvec, at, k * store.config.overfetch, True)
        if len(cand) == 0:
            return _top(store, cand, cand.semantic, k)
        sig = store.signals(cand)
        score = combine(weights, **sig)
        ranked = _top(store, cand, score, k)
        if store.config.record_access:
            store.record_access(ranked.rows, at)
        return ranked
    return rank


def _lifecycle_only(store, qvec, query, k, at):
    """Status filtering and cosine rank; dormant vectors come after the others."""
    cand = store.candidates(qvec, at, k * store.config.overfetch, True)
    dormant = store.status_at(cand.rows, at) == Status.DORMANT
    ranked = _top(store, cand, cand.semantic - 10.0 * dormant, k)
    if len(ranked.rows):
        sem = ranked.signals["semantic"]
        ranked = Ranked(ranked.rows, sem, ranked.signals, float(np.clip(sem[0], 0, 1)))
    return ranked


def _time_weighted(store, qvec, query, k, at, decay_rate: float = 0.01):
    """LangChain's TimeWeightedVectorStoreRetriever: cosine + (1 - decay)^hours since the
    last access (creation time until first retrieved); retrieval refreshes last access."""
    t = at
    cand = store.candidates(qvec, t, k * store.config.overfetch, False)
    last = cand.column("last_accessed")
    last = np.where(np.isnan(last) | (last > t), cand.column("created_at"), last)
    hours = np.maximum(t - last, 0.0) / 3600.0
    ranked = _top(store, cand, cand.semantic + (1.0 - decay_rate) ** hours, k, prob_scale=2.0)
    if store.config.record_access:
        store.record_access(ranked.rows, t)
    return ranked


def _oracle(store, qvec, query, k, at):
    """Upper bound: cosine over vectors known to be current (not deprecated, not injected,
    not stating a value that is stale for this query)."""
    cand = store.candidates(qvec, at, len(store), True)
    ok = np.array([
        not store.meta_of[r].get("injected", False)
        and not any(contains_answer(store.texts[r], s) for s in query.stale_answers)
        for r in cand.rows.tolist()
    ], dtype=bool)
    cand.rows, cand.semantic = cand.rows[ok], cand.semantic[ok]
    return _top(store, cand, cand.semantic, k)


def _without(**zero: float) -> ScoringWeights:
    w = {"semantic": FULL.semantic, "temporal": FULL.temporal,
         "confidence": FULL.confidence, "relational": FULL.relational}
    w.update(zero)
    return ScoringWeights(**w)


def build_methods(weights: ScoringWeights | None = None) -> dict[str, Method]:
    """Every method by name; ``weights`` replaces SmartVector's defaults (weight sweeps)."""
    w = weights or FULL
    sv = [
        ("smartvector", "four-signal score with the paper's defaults", w),
        ("no_temporal", "SmartVector without the temporal signal", _without(temporal=0)),
        ("no_confidence", "SmartVector without the confidence signal", _without(confidence=0)),
        ("no_relational", "SmartVector without the relational signal", _without(relational=0)),
        ("no_semantic", "SmartVector without the semantic signal", _without(semantic=0)),
        ("only_semantic", "lifecycle filter, semantic signal alone",
         ScoringWeights(1, 0, 0, 0)),
        ("only_temporal", "lifecycle filter, temporal signal alone",
         ScoringWeights(0, 1, 0, 0)),
        ("only_confidence", "lifecycle filter, confidence signal alone",
         ScoringWeights(0, 0, 1, 0)),
        ("only_relational", "lifecycle filter, relational signal alone",
         ScoringWeights(0, 0, 0, 1)),
    ]
    out = {
        "plain_cosine": Method("plain_cosine", "cosine top-1 over every vector ever ingested",
                               _cosine(lifecycle=False), time_aware=False),
        "latest_only": Method("latest_only", "cosine over the latest version of each document",
                              _cosine(lifecycle=True), time_aware=False),
        "lifecycle_only": Method("lifecycle_only", "status filtering, cosine rank",
                                 _lifecycle_only),
        "time_weighted": Method("time_weighted", "LangChain time-weighted retriever (0.01/h)",
                                _time_weighted, time_aware=False),
        "oracle": Method("oracle", "cosine over vectors known to be current", _oracle),
    }
    for name, desc, weights_ in sv:
        out[name] = Method(name, desc, _four_signal(weights_))
    return out


METHOD_NAMES = tuple(build_methods())


def check_methods(names: list[str]) -> None:
    """Raise a one-line ValueError for an unknown method name."""
    unknown = [n for n in names if n not in METHOD_NAMES]
    if unknown:
        raise ValueError(f"unknown method {unknown[0]!r} (choose from: {', '.join(METHOD_NAMES)})")
    if not names:
        raise ValueError("no methods selected")

