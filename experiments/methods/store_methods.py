"""Methods on a SmartVector store: the four-signal ranking (SmartVector and its ablations),
cosine baselines with and without the lifecycle filter, LangChain's time-weighted retriever
and two references shown the gold labels. Every one ranks through the store's single search call
(:meth:`smartvector.SmartVectorStore.search`) over a pool of the nearest visible vectors."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from experiments.config import method_store_config
from experiments.data.dataset import DocVersion, Query
from experiments.methods.base import (
    SIGNALS,
    Context,
    QueryInput,
    RankedHit,
    Ranking,
    Retriever,
    clip01,
    register,
)
from experiments.protocol.answers import contains_answer
from smartvector import ScoringWeights, SmartVectorStore, Status
from smartvector.query import SearchResult

SEMANTIC_ONLY = ScoringWeights(1.0, 0.0, 0.0, 0.0)


def _check_pool(pool: int | None) -> None:
    if pool is not None and (not isinstance(pool, int) or isinstance(pool, bool) or pool < 1):
        raise ValueError(f"pool must be an int >= 1 or null (the store's), got {pool!r}")


class StoreRetriever(Retriever):
    """A retriever that owns a :class:`SmartVectorStore` (its index, lifecycle and graph).
    A method's ``store`` parameter (nested keys of :class:`StoreConfig`) overrides the run's
    store config for this method only."""

    def __init__(self, name: str, params, ctx: Context) -> None:
        super().__init__(name, params, ctx)
        config = method_store_config(name, ctx.store_config, getattr(params, "store", None))
        self.store = SmartVectorStore(ctx.embedder, ctx.make_index(), config)

    @property
    def pool(self) -> int:
        p = getattr(self.params, "pool", None)
        return self.store.config.pool if p is None else p

    #: whether this method's searches record accesses (they change the store's state)
    records_access: bool = False

    def state_key(self) -> tuple | None:
        """Stores built from the same config (and index kind) and never written by searching
        are the same store: one replay serves every such method."""
        if self.records_access and self.store.config.record_access:
            return None
        return ("smartvector-store", repr(self.store.config), self.ctx.index,
                self.ctx.index_options)

    def share_state(self, leader: Retriever) -> None:
        self.store = leader.store

    def ingest(self, version: DocVersion) -> int:
        rep = self.store.add_document(
            version.doc_id, version.text, version.ts, version=version.version,
            source_type=version.source_type, authority=version.authority,
            author=version.author, valid_to=version.valid_to_ts,
            depends_on=version.depends_on, meta=version.meta)
        return rep.n_reembedded

    def consolidate(self, at: float) -> None:
        self.store.consolidate(at)

    def feedback(self, hit: RankedHit, accepted: bool, at: float) -> None:
        self.store.feedback(hit.vector_id, accepted, at)

    @property
    def size(self) -> int:
        return len(self.store)

    def _search(self, q: QueryInput, at: float, k: int, *, weights: ScoringWeights,
                lifecycle: bool = True, record_access: bool = False,
                pool: int | None = None) -> SearchResult:
        return self.store.search(None, at, k, vector=q.vector, pool=pool or self.pool,
                                 weights=weights, lifecycle=lifecycle,
                                 record_access=record_access)

    def _hits(self, res: SearchResult, order: np.ndarray, score: np.ndarray) -> list[RankedHit]:
        s = self.store
        sig = res.signals()
        return [RankedHit(s.ids[r], s.doc_of[r], s.texts[r], float(score[i]),
                          {n: float(sig[n][i]) for n in SIGNALS})
                for i, r in zip(order.tolist(), res.rows[order].tolist(), strict=True)]

    def _ranked(self, res: SearchResult, score: np.ndarray, k: int,
                prob_scale: float = 1.0) -> Ranking:
        """The top ``k`` of the pool by ``score`` (ties: lower row first)."""
        if len(res) == 0:
            return Ranking([], float("nan"))
        order = np.lexsort((res.rows, -score))[:k]
        return Ranking(self._hits(res, order, score),
                       clip01(score[order[0]] / prob_scale))


def check_calibration(calibration: dict[str, list[float]] | None) -> None:
    """Raise ValueError unless ``calibration`` is null or knots ``x`` (increasing) and ``y``
    (in [0, 1]) of equal length."""
    if calibration is None:
        return
    x, y = calibration.get("x"), calibration.get("y")
    increasing = all(a <= b for a, b in zip(x or [], (x or [])[1:], strict=False))
    if not x or not y or len(x) != len(y) or not increasing or any(not 0 <= v <= 1 for v in y):
        raise ValueError("calibration needs equal-length lists x (increasing) and y (in [0, 1])")


def calibrated(score: float, calibration: dict[str, list[float]] | None) -> float:
    """The probability of a top score: through the piecewise-linear map ``calibration``, or
    the score clipped to [0, 1] without one."""
    if calibration is None:
        return clip01(score)
    return float(np.interp(score, calibration["x"], calibration["y"]))


@dataclass
class SmartVectorParams:
    """The four-signal ranking. ``weights`` (null: the store's ``store.weights``) are the
    signal weights; ``drop`` zeroes some of them (ablations), ``only`` keeps one."""

    pool: int | None = 50
    weights: dict[str, float] | None = None
    drop: list[str] = field(default_factory=list)
    only: str | None = None
    store: dict | None = None  # overrides of the run's store config for this method
    #: a dev-fitted map from the top-1 score to P(correct): knots ``x`` and ``y`` of a
    #: piecewise-linear function (an isotonic fit); null: the raw score, clipped
    calibration: dict[str, list[float]] | None = None

    def __post_init__(self) -> None:
        _check_pool(self.pool)
        for s in [*self.drop, *([self.only] if self.only else [])]:
            if s not in SIGNALS:
                raise ValueError(f"unknown signal {s!r} (choose from: {', '.join(SIGNALS)})")
        if self.weights is not None:
            unknown = set(self.weights) - set(SIGNALS)
            if unknown:
                raise ValueError(f"weights: unknown signal {sorted(unknown)[0]!r}")
        check_calibration(self.calibration)


@register("smartvector")
class SmartVectorRetriever(StoreRetriever):
    """SmartVector's four-signal score over the lifecycle-filtered pool; retrieval records
    accesses (as live queries do) unless the store config says not to."""

    Params = SmartVectorParams
    records_access = True

    def __init__(self, name: str, params: SmartVectorParams, ctx: Context) -> None:
        super().__init__(name, params, ctx)
        base = self.store.config.weights
        w = {s: float(getattr(base, s)) for s in SIGNALS}
        w.update({s: float(v) for s, v in (params.weights or {}).items()})
        for s in params.drop:
            w[s] = 0.0
        if params.only:
            w = {s: (v if s == params.only else 0.0) for s, v in w.items()}
        try:
            self.weights = ScoringWeights(**w)
        except ValueError as e:
            raise ValueError(f"methods.{name}: {e}") from None

    def search(self, query: QueryInput, at: float, k: int, gold: Query | None = None
               ) -> Ranking:
        res = self._search(query, at, k, weights=self.weights,
                           record_access=self.store.config.record_access)
        ranked = self._ranked(res, res.score, k)
        if self.params.calibration and ranked.hits:
            ranked = Ranking(ranked.hits, calibrated(ranked.hits[0].score,
                                                     self.params.calibration))
        return ranked

    @property
    def recorded_params(self) -> dict:
        return {"pool": self.pool, **{f"weights.{s}": getattr(self.weights, s)
                                      for s in SIGNALS}, "store": self.params.store or {}}


@dataclass
class CosineParams:
    """Cosine rank over the ``pool`` nearest vectors; ``lifecycle`` drops superseded ones
    (the latest version of each document only); ``time_aware: false`` makes the method see
    the final corpus in the time-travel protocol."""

    pool: int | None = 50
    lifecycle: bool = False
    time_aware: bool = False

    def __post_init__(self) -> None:
        _check_pool(self.pool)


@register("cosine")
class CosineRetriever(StoreRetriever):
    """Plain cosine RAG (``lifecycle: false``) or cosine over the latest versions."""

    Params = CosineParams

    def __init__(self, name: str, params: CosineParams, ctx: Context) -> None:
        super().__init__(name, params, ctx)
        self.time_aware = params.time_aware

    def search(self, query: QueryInput, at: float, k: int, gold: Query | None = None
               ) -> Ranking:
        res = self._search(query, at, k, weights=SEMANTIC_ONLY,
                           lifecycle=self.params.lifecycle)
        return self._ranked(res, res.semantic, k)


@dataclass
class PoolParams:
    pool: int | None = 50

    def __post_init__(self) -> None:
        _check_pool(self.pool)


@register("lifecycle_only")
class LifecycleOnlyRetriever(StoreRetriever):
    """Status filtering and cosine rank; dormant vectors come after the others."""

    Params = PoolParams

    def search(self, query: QueryInput, at: float, k: int, gold: Query | None = None
               ) -> Ranking:
        res = self._search(query, at, k, weights=SEMANTIC_ONLY)
        if len(res) == 0:
            return Ranking([], float("nan"))
        dormant = res.status == Status.DORMANT
        order = np.lexsort((res.rows, -(res.semantic - 10.0 * dormant)))[:k]
        return Ranking(self._hits(res, order, res.semantic),
                       clip01(res.semantic[order[0]]))


@dataclass
class TimeWeightedParams:
    """LangChain's ``TimeWeightedVectorStoreRetriever``: cosine + (1 - decay_rate)^hours
    since last access over the ``pool`` most similar vectors (LangChain's ``search_kwargs``
    k, default 100) and the ``k`` most recently added (scored by recency alone unless also
    similar), as LangChain's memory stream does; the probability is the score halved."""

    pool: int | None = 100
    decay_rate: float = 0.01

    def __post_init__(self) -> None:
        _check_pool(self.pool)
        if not 0.0 <= self.decay_rate <= 1.0:
            raise ValueError(f"decay_rate must be in [0, 1], got {self.decay_rate}")


def time_weighted_scores(semantic: np.ndarray, created_at: np.ndarray,
                         last_accessed: np.ndarray, at: float, decay_rate: float) -> np.ndarray:
    """``cos + (1 - decay_rate)^hours`` with hours since the last access at or before ``at``
    (the creation time until first retrieved), as LangChain's retriever scores; a NaN
    cosine (a recent vector that is not among the similar ones) counts as no relevance."""
    last = np.where(np.isnan(last_accessed) | (last_accessed > at), created_at, last_accessed)
    hours = np.maximum(at - last, 0.0) / 3600.0
    return np.nan_to_num(semantic, nan=0.0) + (1.0 - decay_rate) ** hours


@register("time_weighted")
class TimeWeightedRetriever(StoreRetriever):
    """Cosine plus recency of last access over every vector ever ingested (time-blind);
    retrieval refreshes the last access of the returned vectors. Beyond LangChain: a time
    travel query ignores accesses recorded after its time (see ``time_weighted_scores``),
    and a re-issued unchanged chunk is not added again (surgical updates)."""

    Params = TimeWeightedParams
    time_aware = False
    records_access = True

    def search(self, query: QueryInput, at: float, k: int, gold: Query | None = None
               ) -> Ranking:
        res = self._search(query, at, k, weights=SEMANTIC_ONLY, lifecycle=False)
        c = self.store.columns
        created = c["created_at"]
        # LangChain's memory stream: the k vectors added last (rows are in insertion order)
        recent = np.flatnonzero(created <= at)[-k:]
        extra = np.setdiff1d(recent, res.rows)
        rows = np.concatenate([res.rows, extra])
        semantic = np.concatenate([res.semantic, np.full(len(extra), np.nan)])
        if len(rows) == 0:
            return Ranking([], float("nan"))
        score = time_weighted_scores(semantic, created[rows], c["last_accessed"][rows], at,
                                     self.params.decay_rate)
        order = np.lexsort((rows, -score))[:k]
        s = self.store
        sig = res.signals()
        pos = {r: i for i, r in enumerate(res.rows.tolist())}
        hits = [RankedHit(s.ids[r], s.doc_of[r], s.texts[r], float(score[i]),
                          {n: float(sig[n][pos[r]]) for n in SIGNALS} if r in pos else {})
                for i, r in zip(order.tolist(), rows[order].tolist(), strict=True)]
        if self.store.config.record_access:
            self.store.record_access(rows[order], at)
        return Ranking(hits, clip01(score[order[0]] / 2.0))


class _GoldReference(StoreRetriever):
    """Base of the references: methods shown the gold query, to isolate one part of the
    task. They are not ceilings: a method that finds documents better can beat them."""

    Params = dataclass(type("ReferenceParams", (), {}))
    needs_gold = True

    def keep(self, row: int, gold: Query) -> bool:
        raise NotImplementedError

    def search(self, query: QueryInput, at: float, k: int, gold: Query | None = None
               ) -> Ranking:
        if gold is None:
            raise ValueError(f"{self.name} needs the gold query")
        s = self.store
        res = self._search(query, at, k, weights=SEMANTIC_ONLY, pool=max(1, len(s)))
        keep = []  # the k most similar kept rows (ties by row), checked in that order
        for i in np.lexsort((res.rows, -res.semantic)).tolist():
            if self.keep(int(res.rows[i]), gold):
                keep.append(i)
                if len(keep) == k:
                    break
        if not keep:
            return Ranking([], float("nan"))
        order = np.array(keep, dtype=np.int64)
        return Ranking(self._hits(res, order, res.semantic), clip01(res.semantic[order[0]]))


@register("ref_current_cosine")
class CurrentCosineReference(_GoldReference):
    """Cosine over the vectors the lifecycle keeps that are not injected and do not state a
    value that is stale for this query (known from the gold labels). Useful as a reference
    for version filtering with perfect knowledge of stale values, not a ceiling."""

    def keep(self, row: int, gold: Query) -> bool:
        s = self.store
        return not s.meta_of[row].get("injected", False) and not any(
            contains_answer(s.texts[row], a) for a in gold.stale_answers)


@register("ref_document_scoped")
class DocumentScopedReference(_GoldReference):
    """Cosine over the chunks of the query's own documents only (from the gold labels),
    with the lifecycle filter: document finding made perfect, so its accuracy isolates the
    choice of version and passage within the right document."""

    def keep(self, row: int, gold: Query) -> bool:
        return self.store.doc_of[row] in gold.doc_ids
