"""What a practitioner would deploy: a real vector database (Qdrant, through
``qdrant-client`` in local mode: in memory, no server) with a payload filter
``valid_from <= t < valid_to`` at the query's time (in local mode the query passes the ids
that filter selects: see :meth:`QdrantFilterRetriever.matching_rows`). Needs the ``[peers]``
extra."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dataset import DocVersion, Query
from .base import Context, QueryInput, RankedHit, Ranking, Retriever, clip01, register
from .ledger import ChunkLedger

#: stands for "no end" in the payload (JSON has no infinity)
OPEN_END = 1e300
#: extra points fetched so that ties at the k-th place are broken by row, not by Qdrant
TIE_MARGIN = 20


class MissingExtraError(ImportError):
    """An optional dependency of a method is not installed."""


def check_qdrant() -> None:
    """Raise MissingExtraError when qdrant-client is not installed, without importing it
    (the import takes a second or more; runs that end up skipped never need it)."""
    import importlib.util

    if importlib.util.find_spec("qdrant_client") is None:
        raise MissingExtraError(
            "method qdrant_filter needs qdrant-client: pip install -e '.[peers]'")


def require_qdrant():
    """qdrant-client's client class and models; a one-line error naming the extra."""
    try:
        from qdrant_client import QdrantClient, models
    except ImportError:
        raise MissingExtraError(
            "method qdrant_filter needs qdrant-client: pip install -e '.[peers]'") from None
    return QdrantClient, models


@dataclass
class QdrantParams:
    """``validity``: filter on the payload's validity window at the query's time (the
    point of this method; false gives plain cosine in Qdrant)."""

    validity: bool = True


@register("qdrant_filter")
class QdrantFilterRetriever(Retriever):
    """Cosine search in an in-memory Qdrant collection with a validity payload filter."""

    Params = QdrantParams
    COLLECTION = "chunks"
    starts_slowly = True  # importing qdrant-client takes ~0.6 s

    def __init__(self, name: str, params: QdrantParams, ctx: Context) -> None:
        super().__init__(name, params, ctx)
        client_cls, self.models = require_qdrant()
        self.client = client_cls(":memory:")
        self.client.create_collection(self.COLLECTION, vectors_config=self.models.VectorParams(
            size=ctx.embedder.dim, distance=self.models.Distance.COSINE))
        self.ledger = ChunkLedger(ctx.store_config.max_chunk_chars)

    def ingest(self, version: DocVersion) -> int:
        led, m = self.ledger, self.models
        new, changed = led.add(version)
        for r in changed:  # superseded or carried over: the window's end moved
            self.client.set_payload(self.COLLECTION, payload={"valid_to": min(
                led.ends[r], OPEN_END)}, points=[r], wait=True)
        if new:
            vectors = np.asarray(self.ctx.embedder.encode([led.texts[r] for r in new]),
                                 np.float32)
            self.client.upsert(self.COLLECTION, wait=True, points=[
                m.PointStruct(id=r, vector=v.tolist(), payload={
                    "valid_from": led.valid_from[r], "created_at": led.created[r],
                    "valid_to": min(led.ends[r], OPEN_END)})
                for r, v in zip(new, vectors, strict=True)])
        return len(new)

    @property
    def size(self) -> int:
        return len(self.ledger)

    def matching_rows(self, at: float) -> list[int]:
        """The rows the payload filter ``created_at <= t`` (and, with ``validity``,
        ``valid_from <= t < valid_to``) selects at ``t = at``, computed from the same values
        the payload holds (the ledger's), vectorised.

        qdrant-client's local mode evaluates a payload filter in Python, condition by
        condition for every point of the collection (~60 us a point, most of this method's
        time); an id filter costs a set lookup a point. The query therefore passes these ids
        (:meth:`query_filter`): the points Qdrant scores and ranks are exactly those the
        payload filter would select (``tests/test_studies_speed.py`` checks both agree)."""
        return np.flatnonzero(self._selected(at)).tolist()

    def _selected(self, at: float) -> np.ndarray:
        """:meth:`matching_rows` as a mask over the ledger's rows."""
        led = self.ledger
        ok = np.asarray(led.created, dtype=float) <= at
        if self.params.validity:
            ok &= np.asarray(led.valid_from, dtype=float) <= at
            ok &= np.minimum(np.asarray(led.ends, dtype=float), OPEN_END) > at
        return ok

    def payload_filter(self, at: float):
        """The validity filter on the points' payloads (what a Qdrant server would run)."""
        m = self.models
        must = [m.FieldCondition(key="created_at", range=m.Range(lte=at))]
        if self.params.validity:
            must += [m.FieldCondition(key="valid_from", range=m.Range(lte=at)),
                     m.FieldCondition(key="valid_to", range=m.Range(gt=at))]
        return m.Filter(must=must)

    def query_filter(self, at: float):
        """The filter the query runs: the points :meth:`payload_filter` selects, named by id:
        ``must`` have one of their ids or, when fewer are left out, ``must_not`` have one of
        the others (every row of the ledger is a point).

        Local mode tests an id condition by hashing its whole id tuple for every point (a
        list is first copied to a tuple): the shorter list and a tuple built without
        pydantic's validation (the ids are the ledger's own ints) cut that cost."""
        m, ok = self.models, self._selected(at)
        keep = 2 * int(np.count_nonzero(ok)) <= len(ok)
        ids = tuple(np.flatnonzero(ok if keep else ~ok).tolist())
        condition = m.HasIdCondition.model_construct(has_id=ids)
        return m.Filter(must=[condition]) if keep else m.Filter(must_not=[condition])

    def search(self, query: QueryInput, at: float, k: int, gold: Query | None = None
               ) -> Ranking:
        res = self.client.query_points(
            self.COLLECTION, query=np.asarray(query.vector, np.float32).tolist(),
            query_filter=self.query_filter(at), limit=k + TIE_MARGIN, with_payload=False)
        led = self.ledger
        # order by score, then row: Qdrant's order among equal scores (identical boilerplate
        # paragraphs of different documents) is not specified, hence the margin
        points = sorted(res.points, key=lambda p: (-p.score, int(p.id)))[:k]
        hits = [RankedHit(led.ids[int(p.id)], led.doc_of[int(p.id)], led.texts[int(p.id)],
                          float(p.score), {"semantic": float(p.score)}) for p in points]
        return Ranking(hits, clip01(hits[0].score) if hits else float("nan"))
