"""What a practitioner would deploy: a real vector database (Qdrant, through
``qdrant-client`` in local mode: in memory, no server) with a payload filter
``valid_from <= t < valid_to`` at the query's time (in local mode the query passes the ids
that filter selects: see :meth:`QdrantFilterRetriever.matching_rows`). Points whose window
has closed by the latest ingestion move to an archive collection, kept for queries "as of"
an earlier time (see :meth:`QdrantFilterRetriever.query_filters`). Needs the ``[peers]``
extra."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from experiments.data.dataset import DocVersion, Query
from experiments.methods.base import (
    Context,
    MissingExtraError,
    QueryInput,
    RankedHit,
    Ranking,
    Retriever,
    clip01,
    register,
)
from experiments.methods.ledger import ChunkLedger

#: stands for "no end" in the payload (JSON has no infinity)
OPEN_END = 1e300
#: extra points fetched so that ties at the k-th place are broken by row, not by Qdrant
TIE_MARGIN = 20


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
    """Cosine search in an in-memory Qdrant database with a validity payload filter.

    Two collections, as a deployment that keeps its history would have: ``chunks`` holds the
    points still in force at the latest ingestion, ``archive`` those whose window had closed
    by then (superseded, or expired before the ingestion that saw it). A query searches only
    the collections that hold points the filter selects at its time: asked at or after the
    latest ingestion (every query of a replay) that is ``chunks`` alone. The ranking is the
    single-collection one (same scores, ties broken by row) up to the last bit of a float32
    score; local mode examines every point of a searched collection in Python, so a query no
    longer pays for the history (a site-policy replay: 46.5 s with one collection, 12.8 s
    with the archive; one of its 140 top-1 answers changed, between two chunks of one text
    whose scores differ by 1e-9)."""

    Params = QdrantParams
    COLLECTION = "chunks"
    ARCHIVE = "archive"
    #: move closed points to the archive (with ``validity`` only: without the filter every
    #: point stays selected; False: one collection, as the tests compare)
    tiered = True

    @classmethod
    def check(cls, params: QdrantParams) -> None:
        check_qdrant()

    def __init__(self, name: str, params: QdrantParams, ctx: Context) -> None:
        super().__init__(name, params, ctx)
        client_cls, self.models = require_qdrant()
        self.client = client_cls(":memory:")
        for collection in (self.COLLECTION, self.ARCHIVE):
            self.client.create_collection(collection, vectors_config=self.models.VectorParams(
                size=ctx.embedder.dim, distance=self.models.Distance.COSINE))
        self.ledger = ChunkLedger(ctx.store_config.max_chunk_chars)
        self.archived: list[bool] = []  # per ledger row: its point is in the archive

    def ingest(self, version: DocVersion) -> int:
        led, m = self.ledger, self.models
        new, changed = led.add(version)
        self.archived += [False] * len(new)
        to_archive: list[int] = []
        to_live: list[int] = []
        if self.tiered and self.params.validity:
            # windows closed by now (superseded, expired) go to the archive; one reopened
            # by a carried-over chunk comes back
            closed = np.asarray(led.ends, dtype=float) <= version.ts
            archived = np.asarray(self.archived, dtype=bool)
            to_archive = np.flatnonzero(closed & ~archived).tolist()
            to_live = np.flatnonzero(~closed & archived).tolist()
        moving = {*to_archive, *to_live}  # (moved with their current payloads)
        for r in changed:  # superseded or carried over: the window's end moved
            if r not in moving:
                self.client.set_payload(self._collection(r), payload={"valid_to": min(
                    led.ends[r], OPEN_END)}, points=[r], wait=True)
        if new:
            vectors = np.asarray(self.ctx.embedder.encode([led.texts[r] for r in new]),
                                 np.float32)
            self.client.upsert(self.COLLECTION, wait=True, points=[
                m.PointStruct(id=r, vector=v.tolist(), payload=self._payload(r))
                for r, v in zip(new, vectors, strict=True)])
        self._move(to_archive, self.ARCHIVE)
        self._move(to_live, self.COLLECTION)
        return len(new)

    def _payload(self, r: int) -> dict[str, float]:
        led = self.ledger
        return {"valid_from": led.valid_from[r], "created_at": led.created[r],
                "valid_to": min(led.ends[r], OPEN_END)}

    def _collection(self, r: int) -> str:
        return self.ARCHIVE if self.archived[r] else self.COLLECTION

    def _move(self, rows: list[int], to: str) -> None:
        """Copy the points of ``rows`` (their stored vectors, their current payloads) into
        ``to`` and delete them from the other collection."""
        if not rows:
            return
        source = self.COLLECTION if to == self.ARCHIVE else self.ARCHIVE
        records = self.client.retrieve(source, ids=rows, with_vectors=True,
                                       with_payload=False)
        self.client.upsert(to, wait=True, points=[
            self.models.PointStruct(id=p.id, vector=p.vector, payload=self._payload(int(p.id)))
            for p in records])
        self.client.delete(source, points_selector=self.models.PointIdsList(points=rows),
                           wait=True)
        for r in rows:
            self.archived[r] = to == self.ARCHIVE

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
        (:meth:`query_filters`): the points Qdrant scores and ranks are exactly those the
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

    def query_filters(self, at: float) -> dict[str, object]:
        """The collections a query at ``at`` searches, each with the filter it runs there
        (None: every point of the collection): the points :meth:`payload_filter` selects,
        named by id: ``must`` have one of their ids or, when fewer are left out, ``must_not``
        have one of the others. A collection none of whose points is selected is not
        searched.

        Local mode tests an id condition by hashing its whole id tuple for every point (a
        list is first copied to a tuple): the shorter list and a tuple built without
        pydantic's validation (the ids are the ledger's own ints) cut that cost."""
        m, ok = self.models, self._selected(at)
        in_archive = np.asarray(self.archived, dtype=bool)
        out: dict[str, object] = {}
        for collection, here in ((self.COLLECTION, ~in_archive), (self.ARCHIVE, in_archive)):
            chosen, left_out = ok & here, ~ok & here
            n_chosen, n_left_out = int(np.count_nonzero(chosen)), int(np.count_nonzero(left_out))
            if n_chosen == 0:
                continue
            if n_left_out == 0:
                out[collection] = None
                continue
            keep = n_chosen <= n_left_out
            ids = tuple(np.flatnonzero(chosen if keep else left_out).tolist())
            condition = m.HasIdCondition.model_construct(has_id=ids)
            out[collection] = m.Filter(must=[condition]) if keep else m.Filter(
                must_not=[condition])
        return out

    def search(self, query: QueryInput, at: float, k: int, gold: Query | None = None
               ) -> Ranking:
        vector = np.asarray(query.vector, np.float32).tolist()
        points = [p for collection, flt in self.query_filters(at).items()
                  for p in self.client.query_points(
                      collection, query=vector, query_filter=flt, limit=k + TIE_MARGIN,
                      with_payload=False).points]
        led = self.ledger
        # order by score, then row: Qdrant's order among equal scores (identical boilerplate
        # paragraphs of different documents) is not specified, hence the margin
        points = sorted(points, key=lambda p: (-p.score, int(p.id)))[:k]
        hits = [RankedHit(led.ids[int(p.id)], led.doc_of[int(p.id)], led.texts[int(p.id)],
                          float(p.score), {"semantic": float(p.score)}) for p in points]
        return Ranking(hits, clip01(hits[0].score) if hits else float("nan"))
