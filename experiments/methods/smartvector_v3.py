"""SmartVector v3: lexical and dense candidates over the versions visible at the question's
time, fused by reciprocal rank, then re-ranked by the store's time and confidence signals
*within a subject only*.

What the measurements said (issue 45): every time-aware gain on real data came from
filtering by validity, and a recency signal applied across documents picks recently changed
documents over the one asked about. So v3

1. keeps only the rows a SmartVector store holds as in force at ``at`` (created, not
   superseded or archived, inside their validity window; optionally not the loser of a
   contradiction the store's consolidation resolved);
2. takes the top ``depth`` of BM25 and of cosine over those rows and fuses them by
   reciprocal rank (``rrf_k``; the BM25 list weighs ``w_lexical``, cosine 1);
   ``doc_weight`` mixes in the best fused score of the chunk's document (a subject-aware
   step from the content alone: a chunk of the document the question is about scores
   with it);
3. groups the candidates into *subjects*: the same document, or linked by the store's
   ``supersedes`` or ``contradicts`` edges between documents that restate each other
   (in-force centroids' cosine at least ``subject_similarity``); inside a subject, a
   chunk loses ``w_temporal * (1 - 2^(-(newest - its start) / half_life))`` (its start: when its
   document's version in force began, the same for every chunk of a version) and
   ``w_confidence * (best confidence - its confidence)``; the best of each subject loses
   nothing, so the signals never move one subject against another;
4. reports a calibrated probability (an isotonic map fitted on development predictions).

The store is configured like v2's (``store``: validity-anchored signals, authority-margin
contradiction resolution); every number is chosen by ``experiments.studies.select_v3`` on
development data only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from experiments.data.dataset import Query
from experiments.methods.base import QueryInput, RankedHit, Ranking, register
from experiments.methods.bm25 import BM25Index
from experiments.methods.hybrid import rrf, top_ranked
from experiments.methods.store_methods import StoreRetriever, calibrated, check_calibration


@dataclass
class SmartVectorV3Params:
    """See the module docstring. ``calibration``: knots ``x``/``y`` of a piecewise-linear
    map from the top score to P(correct) (null: the score clipped to [0, 1])."""

    depth: int = 50
    rrf_k: int = 60
    w_lexical: float = 1.0
    k1: float = 1.5
    b: float = 0.75
    doc_weight: float = 0.0
    w_temporal: float = 0.0
    w_confidence: float = 0.0
    half_life_days: float = 180.0
    subject_similarity: float = 0.9
    drop_lost: bool = False
    store: dict | None = None
    calibration: dict[str, list[float]] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.depth, int) or self.depth < 1:
            raise ValueError(f"depth must be an int >= 1, got {self.depth!r}")
        if self.rrf_k < 0:
            raise ValueError(f"rrf_k must be >= 0, got {self.rrf_k}")
        for name in ("w_lexical", "doc_weight", "w_temporal", "w_confidence"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not 0 <= self.subject_similarity:
            raise ValueError(f"subject_similarity must be >= 0, got {self.subject_similarity!r}")
        if not self.half_life_days > 0:
            raise ValueError(f"half_life_days must be > 0, got {self.half_life_days!r}")
        check_calibration(self.calibration)


class SharedState:
    """What every v3 setting on one store shares: the store, BM25 postings over its rows,
    their unit-normalised embeddings (read from the index once each), and the last query's
    lexical and cosine scores (settings sharing a replay answer the same query in turn)."""

    def __init__(self, store, k1: float, b: float, dim: int) -> None:
        self.store = store
        self.bm25 = BM25Index(store, k1, b)
        self.matrix = np.empty((0, dim), dtype=np.float32)
        self._last: tuple | None = None
        self._docs: tuple[float, dict[str, tuple[np.ndarray, float]]] = (np.nan, {})

    def dense(self, n: int) -> np.ndarray:
        """Unit-normalised embeddings of the first ``n`` rows."""
        have = len(self.matrix)
        if have < n:
            new = np.asarray(self.store.index.get_vectors(np.arange(have, n)), np.float32)
            norms = np.linalg.norm(new, axis=1, keepdims=True)
            self.matrix = np.concatenate([self.matrix, new / np.where(norms > 0, norms, 1)])
        return self.matrix[:n]

    def document(self, doc: str, at: float) -> tuple[np.ndarray, float]:
        """(the unit mean embedding, the start of the version in force) of ``doc``'s rows in
        force at ``at``; remembered for one time at a time."""
        if self._docs[0] != at:
            self._docs = (at, {})
        memo = self._docs[1]
        if doc not in memo:
            c = self.store.columns
            rows = np.asarray(self.store.docs[doc].rows, dtype=np.int64)
            rows = rows[(c["created_at"][rows] <= at) & ~(c["superseded_at"][rows] <= at)]
            if len(rows) == 0:
                memo[doc] = (np.zeros(self.matrix.shape[1], np.float32), -np.inf)
            else:
                m = self.dense(int(rows.max()) + 1)[rows].mean(axis=0)
                memo[doc] = (m / max(float(np.linalg.norm(m)), 1e-12),
                             float(c["created_at"][rows].max()))
        return memo[doc]

    def scores(self, query: QueryInput, at: float) -> tuple[int, np.ndarray, np.ndarray]:
        """(rows created by ``at``, BM25 and cosine scores of each) for one query."""
        key = (query.id, query.text, at)
        last = self._last
        if last is None or last[0] != key or not np.array_equal(last[1], query.vector):
            c = self.store.columns["created_at"][:len(self.store)]
            n = int(np.searchsorted(c, at, side="right"))
            qv = np.asarray(query.vector, np.float32)
            qv = qv / max(float(np.linalg.norm(qv)), 1e-12)
            self._last = (key, np.array(query.vector), n, self.bm25.scores(query.text, n),
                          (self.dense(n) @ qv).astype(np.float64))
        return self._last[2:]


@register("smartvector_v3")
class SmartVectorV3Retriever(StoreRetriever):
    """Fused lexical + dense candidates in force, time and confidence within a subject."""

    Params = SmartVectorV3Params

    def __init__(self, name: str, params: SmartVectorV3Params, ctx) -> None:
        super().__init__(name, params, ctx)
        self.shared = SharedState(self.store, params.k1, params.b, ctx.embedder.dim)

    def state_key(self) -> tuple:
        """One store (and its BM25 postings) per store config and BM25 setting; every other
        parameter acts at search time."""
        return ("smartvector-v3", repr(self.store.config), self.ctx.index,
                self.ctx.index_options, self.params.k1, self.params.b)

    def share_state(self, leader) -> None:
        self.store, self.shared = leader.store, leader.shared

    def visible(self, at: float, n: int) -> np.ndarray:
        """Rows below ``n`` in force at ``at`` (see the module docstring, step 1)."""
        c = self.store.columns
        ok = ((c["created_at"][:n] <= at) & ~(c["superseded_at"][:n] <= at)
              & ~(c["archived_at"][:n] <= at) & (at < c["valid_to"][:n]))
        if self.params.drop_lost:
            ok &= ~(c["lost_at"][:n] <= at)
        return np.flatnonzero(ok)

    def search(self, query: QueryInput, at: float, k: int, gold: Query | None = None
               ) -> Ranking:
        p, s = self.params, self.store
        n, lexical, cos = self.shared.scores(query, at)
        rows = self.visible(at, n)
        if len(rows) == 0:
            return Ranking([], float("nan"))
        lists = [top_ranked(lexical, rows[lexical[rows] > 0], p.depth),
                 top_ranked(cos, rows, p.depth)]
        if not p.w_lexical:
            lists = lists[1:]
        # weighted reciprocal-rank fusion, scaled so that first in both lists is 1.0
        fused = (p.w_lexical * rrf(lists[:-1], n, p.rrf_k) + rrf(lists[-1:], n, p.rrf_k)) * (
            (p.rrf_k + 1.0) / (1.0 + p.w_lexical))
        cand = np.unique(np.concatenate(lists))
        score = self._rerank(cand, fused[cand], at)
        order = np.lexsort((cand, -score))[:k]
        top_rows = cand[order]
        conf = s.confidence_at(top_rows, at)
        hits = [RankedHit(s.ids[r], s.doc_of[r], s.texts[r], float(score[i]),
                          {"semantic": float(cos[r]), "confidence": float(cf)})
                for i, r, cf in zip(order.tolist(), top_rows.tolist(), conf.tolist(),
                                    strict=True)]
        return Ranking(hits, calibrated(float(score[order[0]]), p.calibration))

    def _rerank(self, cand: np.ndarray, fused: np.ndarray, at: float) -> np.ndarray:
        p, s = self.params, self.store
        docs = [s.doc_of[r] for r in cand.tolist()]
        score = fused.copy()
        if p.doc_weight:
            best: dict[str, float] = {}
            for d, f in zip(docs, fused.tolist(), strict=True):
                best[d] = max(best.get(d, 0.0), f)
            score = (1 - p.doc_weight) * fused + p.doc_weight * np.array([best[d] for d in docs])
        if not (p.w_temporal or p.w_confidence):
            return score
        subject = self.subjects(cand, docs, at)
        if p.w_temporal:
            start = np.array([self.shared.document(d, at)[1] for d in docs])
            newest = np.full(len(cand), -np.inf)
            for g in np.unique(subject):
                newest[subject == g] = start[subject == g].max()
            age_days = (newest - start) / 86400.0
            score -= p.w_temporal * (1.0 - np.exp2(-age_days / p.half_life_days))
        if p.w_confidence:
            conf = s.confidence_at(cand, at)
            top = np.zeros(len(cand))
            for g in np.unique(subject):
                top[subject == g] = conf[subject == g].max()
            score -= p.w_confidence * (top - conf)
        return score

    def subjects(self, cand: np.ndarray, docs: list[str], at: float) -> np.ndarray:
        """A subject number per candidate: the same document, or linked by a ``supersedes``
        or ``contradicts`` edge made by ``at`` between documents that restate each other (the
        cosine of their in-force centroids at least ``subject_similarity``): a document that
        replaces another, not two documents with a clause in common."""
        where = {r: i for i, r in enumerate(cand.tolist())}
        first: dict[str, int] = {}
        links: list[tuple[int, int]] = []
        graph = self.store.graph
        for i, (r, d) in enumerate(zip(cand.tolist(), docs, strict=True)):
            links.append((i, first.setdefault(d, i)))
            for kind in ("supersedes", "superseded_by", "contradicts"):
                for other in graph.neighbours(kind, r, at):
                    j = where.get(other)
                    if j is not None and (docs[j] == d or self._restates(d, docs[j], at)):
                        links.append((i, j))
        a, b = np.array(links).T
        n = len(cand)
        adjacency = coo_matrix((np.ones(len(a)), (a, b)), shape=(n, n))
        return connected_components(adjacency, directed=False)[1]

    def _restates(self, a: str, b: str, at: float) -> bool:
        sim = float(self.shared.document(a, at)[0] @ self.shared.document(b, at)[0])
        return sim >= self.params.subject_similarity

    @property
    def recorded_params(self) -> dict:
        p = self.params
        return {"depth": p.depth, "rrf_k": p.rrf_k, "w_lexical": p.w_lexical, "k1": p.k1, "b": p.b,
                "doc_weight": p.doc_weight, "w_temporal": p.w_temporal,
                "w_confidence": p.w_confidence, "half_life_days": p.half_life_days,
                "subject_similarity": p.subject_similarity,
                "drop_lost": p.drop_lost, "store": p.store or {},
                "calibrated": p.calibration is not None}
