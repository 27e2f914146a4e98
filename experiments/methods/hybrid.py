"""Hybrid retrieval: reciprocal-rank fusion of BM25 and exact cosine, both over the chunks in
force at the query's time (the validity filter)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from experiments.data.dataset import DocVersion, Query
from experiments.methods.base import Context, QueryInput, RankedHit, Ranking, Retriever, register
from experiments.methods.bm25 import BM25Index
from experiments.methods.ledger import ChunkLedger


@dataclass
class HybridParams:
    """RRF score ``sum over lists of 1 / (rrf_k + rank)`` over the top ``depth`` of each
    list; BM25's ``k1``/``b``; ``validity`` filters both lists at the query's time."""

    rrf_k: int = 60
    depth: int = 50
    k1: float = 1.5
    b: float = 0.75
    validity: bool = True

    def __post_init__(self) -> None:
        if self.rrf_k < 0:
            raise ValueError(f"rrf_k must be >= 0, got {self.rrf_k}")
        if self.depth < 1:
            raise ValueError(f"depth must be >= 1, got {self.depth}")


def rrf(rankings: list[np.ndarray], n: int, rrf_k: int) -> np.ndarray:
    """Reciprocal-rank fusion scores of ``n`` items from ranked lists of item numbers."""
    score = np.zeros(n)
    for ranked in rankings:
        score[ranked] += 1.0 / (rrf_k + 1.0 + np.arange(len(ranked)))
    return score


def top_ranked(scores: np.ndarray, rows: np.ndarray, depth: int) -> np.ndarray:
    """``rows`` ordered by descending score (ties: lower row first), at most ``depth``."""
    return rows[np.lexsort((rows, -scores[rows]))][:depth]


@register("hybrid_rrf")
class HybridRRFRetriever(Retriever):
    """BM25 + cosine fused by reciprocal rank, with the validity filter."""

    Params = HybridParams

    def __init__(self, name: str, params: HybridParams, ctx: Context) -> None:
        super().__init__(name, params, ctx)
        self.ledger = ChunkLedger(ctx.store_config.max_chunk_chars)
        self.bm25 = BM25Index(self.ledger, params.k1, params.b)
        self._vectors: list[np.ndarray] = []
        self._matrix = np.empty((0, ctx.embedder.dim), dtype=np.float32)
        self._norms = np.empty(0, dtype=np.float32)  # of the matrix's rows

    def ingest(self, version: DocVersion) -> int:
        new, _ = self.ledger.add(version)
        if new:
            self._vectors.append(np.asarray(
                self.ctx.embedder.encode([self.ledger.texts[r] for r in new]), np.float32))
        return len(new)

    @property
    def size(self) -> int:
        return len(self.ledger)

    def _cosine(self, vector: np.ndarray, n: int) -> np.ndarray:
        if self._vectors:  # (each row's norm once: a row's norm does not depend on others)
            self._norms = np.concatenate(
                [self._norms, *(np.linalg.norm(v, axis=1) for v in self._vectors)])
            self._matrix = np.concatenate([self._matrix, *self._vectors])
            self._vectors = []
        m = self._matrix[:n]
        norms = self._norms[:n] * float(np.linalg.norm(vector))
        return (m @ vector).astype(np.float64) / np.where(norms > 0, norms, 1.0)

    def search(self, query: QueryInput, at: float, k: int, gold: Query | None = None
               ) -> Ranking:
        p = self.params
        mask = self.ledger.visible(at, p.validity)
        n = len(mask)
        rows = np.flatnonzero(mask)
        if len(rows) == 0:
            return Ranking([], float("nan"))
        lexical = self.bm25.scores(query.text, n)
        cos = self._cosine(np.asarray(query.vector, np.float32), n)
        lex_rows = rows[lexical[rows] > 0]
        fused = rrf([top_ranked(lexical, lex_rows, p.depth), top_ranked(cos, rows, p.depth)],
                    n, p.rrf_k)
        order = top_ranked(fused, rows[fused[rows] > 0], k)
        led = self.ledger
        hits = [RankedHit(led.ids[r], led.doc_of[r], led.texts[r], float(fused[r]),
                          {"semantic": float(cos[r])}) for r in order.tolist()]
        best = 2.0 / (p.rrf_k + 1.0)  # first in both lists
        return Ranking(hits, float(np.clip(fused[order[0]] / best, 0, 1)) if len(order)
                       else float("nan"))
