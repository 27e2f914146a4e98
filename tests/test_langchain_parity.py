"""The ``time_weighted`` baseline against LangChain's own ``TimeWeightedVectorStoreRetriever``
(package ``langchain-classic``), run side by side on the same texts, embeddings and times.

What LangChain computes (read from langchain_classic/retrievers/time_weighted_retriever.py,
langchain-classic 1.0.x, and langchain_core/vectorstores):

* ``add_documents(docs, current_time=t)`` sets ``created_at`` and ``last_accessed_at`` to ``t``
  (unless the metadata has them) and appends the documents to its ``memory_stream``.
* A query at ``now = datetime.datetime.now()`` (fixed here with ``mock_now``) takes as
  candidates the ``search_kwargs["k"]`` (default 100) nearest documents of the vector store,
  each with its relevance score, plus the last ``k`` documents of the memory stream (the most
  recently added) with ``default_salience`` (None: no relevance term) unless they are among
  the nearest too.
* Combined score: ``(1 - decay_rate) ** hours_passed + relevance`` (+ ``other_score_keys``,
  none here) with ``hours_passed = (now - last_accessed_at).total_seconds() / 3600``: no
  rounding, no clamping.
* It sorts by that score (stable: ties stay in candidate order), returns the top ``k`` and
  sets their ``last_accessed_at`` to ``now`` in the memory stream.
* Relevance: ``InMemoryVectorStore`` has no ``_select_relevance_score_fn`` (LangChain raises
  NotImplementedError), so :class:`CosineInMemoryVectorStore` supplies the identity: its
  ``similarity_search_with_score`` already returns the cosine similarity (a store returning
  the cosine distance would use ``1 - distance``, the same number).

Ours (``experiments.methods.store_methods``): ``cos + (1 - decay_rate) ** hours`` since the
last access (the creation time until first retrieved) over the ``pool`` nearest vectors ever
ingested (``pool`` = LangChain's ``search_kwargs["k"]``); the returned top ``k`` get an access
recorded at the query's time. Deliberate differences (the tests avoid them):

1. exact ties: ours puts the lower row first, LangChain keeps its candidate order;
2. asked at a time before the last recorded access (time travel), ours uses the creation time
   and clamps negative ages to 0; LangChain has no past queries (a negative ``hours_passed``
   would give a recency above 1);
3. versions: our store keeps the unchanged chunks of a new version (their creation and access
   times carry over) and adds only the changed ones: the LangChain side is given exactly the
   chunks our store added, at the same times;
4. precision: our cosine comes from the float32 index, LangChain's is float64 (~1e-7 apart).

Matched since this test found it: LangChain also scores the last ``k`` documents added, with
recency alone, even when they are not among the nearest (its memory stream); ours does too,
and its ``pool`` plays LangChain's ``search_kwargs`` k (100 in both by default).
"""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from experiments.data.dataset import DocVersion, load_dataset
from experiments.methods import Context, QueryInput, Ranking, make_retriever
from experiments.methods.store_methods import time_weighted_scores
from experiments.protocol.replay import timeline
from smartvector import HashingEmbedder, ScoringWeights, StoreConfig

_why = "the LangChain parity tests need langchain-classic (pip install -e '.[peers]')"
twr = pytest.importorskip("langchain_classic.retrievers.time_weighted_retriever", reason=_why)
lc_documents = pytest.importorskip("langchain_core.documents", reason=_why)
lc_embeddings = pytest.importorskip("langchain_core.embeddings", reason=_why)
lc_utils = pytest.importorskip("langchain_core.utils", reason=_why)
lc_vectorstores = pytest.importorskip("langchain_core.vectorstores", reason=_why)

Document = lc_documents.Document
mock_now = lc_utils.mock_now
TimeWeightedVectorStoreRetriever = twr.TimeWeightedVectorStoreRetriever

ROOT = Path(__file__).resolve().parents[1]
T0 = dt.datetime(2024, 3, 1, tzinfo=dt.UTC).timestamp()
HOUR = 3600.0
SEMANTIC_ONLY = ScoringWeights(1.0, 0.0, 0.0, 0.0)


class HashingEmbeddings(lc_embeddings.Embeddings):
    """LangChain's view of our HashingEmbedder: the very same vectors."""

    def __init__(self, emb: HashingEmbedder) -> None:
        self.emb = emb

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return np.asarray(self.emb.encode(list(texts)), np.float64).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class CosineInMemoryVectorStore(lc_vectorstores.InMemoryVectorStore):
    """InMemoryVectorStore returns cosine similarities: relevance is the similarity itself."""

    def _select_relevance_score_fn(self):
        return lambda similarity: similarity


def when(t: float) -> dt.datetime:
    """POSIX seconds as the aware UTC datetime given to LangChain (never local time)."""
    return dt.datetime.fromtimestamp(t, dt.UTC)


@pytest.fixture(scope="module")
def emb() -> HashingEmbedder:
    return HashingEmbedder(dim=256)


class SideBySide:
    """Our time_weighted retriever and LangChain's, fed the same chunks at the same times."""

    def __init__(self, emb: HashingEmbedder, pool: int, k: int, decay_rate: float = 0.01
                 ) -> None:
        self.emb, self.pool, self.k, self.decay = emb, pool, k, decay_rate
        node = OmegaConf.to_container(
            OmegaConf.load(ROOT / "conf" / "methods" / "time_weighted.yaml"))["time_weighted"]
        assert node["decay_rate"] == 0.01  # the configured rate is LangChain's default
        node.update(pool=pool, decay_rate=decay_rate)
        self.ours = make_retriever("time_weighted", node, Context(emb, StoreConfig()))
        self.lc = TimeWeightedVectorStoreRetriever(
            vectorstore=CosineInMemoryVectorStore(HashingEmbeddings(emb)),
            decay_rate=decay_rate, k=k, search_kwargs={"k": pool})

    @property
    def store(self):
        return self.ours.store

    def ingest(self, version: DocVersion) -> None:
        n0 = len(self.store)
        self.ours.ingest(version)
        new = range(n0, len(self.store))  # the chunks our store embedded for this version
        if new:
            self.lc.add_documents(
                [Document(page_content=self.store.texts[r],
                          metadata={"vector_id": self.store.ids[r]}) for r in new],
                current_time=when(version.ts))

    def our_scores(self, text: str, at: float) -> dict[str, float]:
        """Our time-weighted score of every candidate in the pool (no access recorded)."""
        s = self.store
        res = s.search(None, at, 1, vector=self.emb.encode([text])[0], pool=self.pool,
                       weights=SEMANTIC_ONLY, lifecycle=False, record_access=False)
        c = s.columns
        score = time_weighted_scores(res.semantic, c["created_at"][res.rows],
                                     c["last_accessed"][res.rows], at, self.decay)
        return dict(zip([s.ids[r] for r in res.rows.tolist()], score.tolist(), strict=True))

    def langchain_scores(self, text: str, at: float) -> dict[str, float]:
        """LangChain's combined score of every candidate, as its _get_relevant_documents
        builds them (memory-stream tail, then the salient documents)."""
        lc = self.lc
        cand = {d.metadata["buffer_idx"]: (d, lc.default_salience)
                for d in lc.memory_stream[-lc.k:]}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Relevance scores must be between 0 and 1"
            cand.update(lc.get_salient_docs(text))
        return {d.metadata["vector_id"]: documented_score(lc, d, rel, when(at))
                for d, rel in cand.values()}

    def ask(self, text: str, at: float) -> tuple[Ranking, list[str]]:
        """Both retrievers answer (and record their accesses): ours, LangChain's ids."""
        ranking = self.ours.search(QueryInput("q", text, self.emb.encode([text])[0], at),
                                   at, self.k)
        with mock_now(when(at)), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            docs = self.lc.invoke(text)
        return ranking, [d.metadata["vector_id"] for d in docs]

    def last_access_parity(self) -> None:
        """Every chunk's last access (creation until retrieved) is the same on both sides."""
        c = self.store.columns
        for d in self.lc.memory_stream:
            r = self.store.row(d.metadata["vector_id"])
            ours = c["last_accessed"][r]
            ours = c["created_at"][r] if np.isnan(ours) else ours
            assert d.metadata["last_accessed_at"].timestamp() == ours
            assert d.metadata["created_at"].timestamp() == c["created_at"][r]


# --- the score itself -----------------------------------------------------------------------


def documented_score(lc, doc, relevance: float | None, now) -> float:
    """LangChain's combined score as its retriever documents it, from the retriever's public
    fields: ``(1 - decay_rate) ** hours`` since the document's ``last_accessed_at``, plus its
    ``other_score_keys`` and the vector relevance (its code is private; the rankings below
    compare with what its public ``invoke`` returns)."""
    hours = (now - doc.metadata["last_accessed_at"]).total_seconds() / 3600
    score = (1.0 - lc.decay_rate) ** hours
    for key in lc.other_score_keys:
        score += doc.metadata.get(key, 0.0)
    return score + (relevance if relevance is not None else 0.0)


@pytest.mark.parametrize("decay_rate", [0.0, 0.01, 0.05, 0.5, 1.0])
def test_time_weighted_scores_equal_langchains_combined_score(decay_rate: float) -> None:
    lc = TimeWeightedVectorStoreRetriever(
        vectorstore=CosineInMemoryVectorStore(HashingEmbeddings(HashingEmbedder(dim=8))),
        decay_rate=decay_rate)
    created = T0
    for cos in (-0.25, 0.0, 0.3, 0.91):
        for hours in (0.0, 0.25, 1.0, 7.5, 24.0, 24.0 * 30):
            for accessed in (None, 0.5 * hours):  # never retrieved / last retrieved later
                at = created + hours * HOUR
                last = created if accessed is None else created + accessed * HOUR
                ours = time_weighted_scores(
                    np.array([cos]), np.array([created]),
                    np.array([np.nan if accessed is None else last]), at, decay_rate)[0]
                doc = Document(page_content="x", metadata={
                    "created_at": when(created), "last_accessed_at": when(last)})
                theirs = documented_score(lc, doc, cos, when(at))
                assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-12)
                assert ours == pytest.approx(cos + (1 - decay_rate) ** ((at - last) / HOUR))


def test_time_travel_before_the_last_access_is_a_deliberate_difference() -> None:
    # asked before its last recorded access, ours falls back to the creation time; LangChain
    # (which only ever asks "now") would take the future access and give a recency above 1
    created, accessed, at = T0, T0 + 10 * HOUR, T0 + 4 * HOUR
    ours = time_weighted_scores(np.array([0.5]), np.array([created]), np.array([accessed]),
                                at, 0.01)[0]
    assert ours == pytest.approx(0.5 + 0.99 ** 4)
    lc = TimeWeightedVectorStoreRetriever(
        vectorstore=CosineInMemoryVectorStore(HashingEmbeddings(HashingEmbedder(dim=8))))
    doc = Document(page_content="x", metadata={"last_accessed_at": when(accessed)})
    assert documented_score(lc, doc, 0.5, when(at)) == pytest.approx(0.5 + 0.99 ** -6)


# --- rankings, side by side -------------------------------------------------------------------

#: (doc id, version, text, hours after T0): distinct texts of different lengths that all share
#: "the" with every question, so every cosine is non-zero and differs: no two scores tie
#: (ties are ordered differently on the two sides; replay_side_by_side checks there is none)
SAMPLE = [
    ("vpn", 1, "The VPN gateway requires the corporate client and a hardware token.", 0),
    ("wifi", 1, "Guest wifi passwords rotate every Monday at the front desk.", 2),
    ("laptop", 1, "Lost laptops must be reported to the security team within one hour.", 5),
    ("badge", 1, "Visitor badges are printed at the front desk and returned on leaving the site.",
     9),
    ("token", 1, "Hardware tokens are replaced by the security team free of charge.", 30),
    ("printer", 1, "The third floor printer needs a badge tap before each print job.", 47),
    ("vpn", 2, "The VPN gateway requires the corporate client and a phone passkey since the "
     "spring.", 70),
    ("mail", 1, "Mailbox quotas are fifty gigabytes for the account of every employee.", 95),
]

#: (hours after T0, question): some between ingestions, repeated questions see the accesses
SAMPLE_QUERIES = [
    (50, "Who do I tell about the lost laptop?"),
    (51, "Where do visitors get the badges?"),
    (60, "How does the VPN gateway authenticate the corporate client?"),
    (75, "How does the VPN gateway authenticate the corporate client?"),
    (76, "Who replaces the hardware token?"),
    (120, "Where do visitors get the badges?"),
    (500, "What is the guest wifi password?"),
    (501, "Does the printer need a badge?"),
]


def sample_versions() -> list[tuple[float, DocVersion]]:
    return [(T0 + h * HOUR, DocVersion(d, v, text, when(T0 + h * HOUR)))
            for d, v, text, h in SAMPLE]


def replay_side_by_side(pair: SideBySide) -> list[tuple[list[str], list[str]]]:
    """Ingest the sample and ask its questions in time order; both answers per question."""
    events = sorted([(t, 0, v) for t, v in sample_versions()]
                    + [(T0 + h * HOUR, 1, q) for h, q in SAMPLE_QUERIES],
                    key=lambda e: (e[0], e[1]))
    out = []
    for t, kind, obj in events:
        if kind == 0:
            pair.ingest(obj)
            continue
        ours, theirs = pair.our_scores(obj, t), pair.langchain_scores(obj, t)
        ranking, lc_ids = pair.ask(obj, t)
        ids = [h.vector_id for h in ranking.hits]
        out.append((ids, lc_ids))
        top = sorted(ours.values(), reverse=True)[: pair.k + 1]
        assert len(set(top)) == len(top), f"a tie in the sample at {obj!r}: {top}"
        if pair.pool >= len(pair.store):  # the same candidates, the same scores
            assert set(ours) == set(theirs)
            for v, s in ours.items():
                assert s == pytest.approx(theirs[v], abs=1e-6), v
            # our hits carry exactly that score, and the probability is half of it
            assert [h.score for h in ranking.hits] == [ours[v] for v in ids]
            assert ranking.probability == pytest.approx(min(1.0, ranking.hits[0].score / 2))
    return out


@pytest.mark.parametrize(("k", "decay_rate"), [(1, 0.01), (3, 0.01), (3, 0.2)])
def test_ranking_and_access_updates_match_langchain(emb, k: int, decay_rate: float) -> None:
    pair = SideBySide(emb, pool=50, k=k, decay_rate=decay_rate)
    answers = replay_side_by_side(pair)
    assert len(answers) == len(SAMPLE_QUERIES)
    for ids, lc_ids in answers:
        assert len(ids) == k
        assert ids == lc_ids
    # the accesses recorded by retrieval are the same on both sides
    pair.last_access_parity()
    assert int(np.sum(~np.isnan(pair.store.columns["last_accessed"][: len(pair.store)]))) > 0
    # the superseded VPN chunk stays a candidate on both sides (time-blind, no lifecycle)
    assert {"vpn@v1#0", "vpn@v2#0"} <= set(pair.our_scores("VPN gateway", T0 + 100 * HOUR))


def test_the_access_update_changes_later_rankings(emb) -> None:
    # the comparison can see the access update: on both sides, retrieving the wifi chunk an
    # hour before a question about badges puts it above the (more similar) badge chunk
    t = T0 + 200 * HOUR
    q = "Where do visitors get the badges at the front desk?"
    tops = {}
    for touched in (False, True):
        pair = SideBySide(emb, pool=50, k=1)
        for _, v in sample_versions():
            pair.ingest(v)
        if touched:
            ranking, lc_ids = pair.ask("Guest wifi passwords rotate every Monday", t)
            assert [h.vector_id for h in ranking.hits] == lc_ids == ["wifi@v1#0"]
        scores = pair.our_scores(q, t + HOUR)
        ranking, lc_ids = pair.ask(q, t + HOUR)
        assert [h.vector_id for h in ranking.hits] == lc_ids
        tops[touched] = (lc_ids[0], scores["wifi@v1#0"])
        pair.last_access_parity()
    assert tops[False][0] == "badge@v1#0" and tops[True][0] == "wifi@v1#0"
    assert tops[True][1] - tops[False][1] == pytest.approx(0.99 - 0.99 ** (201 - 2))


def test_a_pool_smaller_than_the_corpus_matches_langchain(emb) -> None:
    pair = SideBySide(emb, pool=2, k=2)
    for _, v in sample_versions():
        pair.ingest(v)
    # an hour after the last ingestion: the two most recent chunks (mail, vpn v2) are the
    # memory-stream tail, unrelated to the question, with a recency of ~0.99
    ranking, lc_ids = pair.ask("Who do I tell about a lost laptop?", T0 + 96 * HOUR)
    assert [h.vector_id for h in ranking.hits] == lc_ids


def test_policy_synth_scores_match_langchain_for_every_chunk(emb) -> None:
    # the whole committed dataset, with LangChain's search covering every chunk (pool >= the
    # corpus): for every query, every chunk's score agrees and LangChain's answer has the same
    # scores in the same order as ours. The dataset has identical boilerplate chunks (exact
    # ties, ordered differently on the two sides): where a tie straddles the k-th place the
    # two sides legitimately retrieve different chunks, so LangChain's access times are then
    # re-synchronised from ours to keep comparing the same state.
    ds = load_dataset(ROOT / "datasets" / "policy_synth")
    k = 5
    pair = SideBySide(emb, pool=10_000, k=k)
    boundary_ties = 0
    exact = 0
    for t, kind, obj in timeline(ds):
        if kind == 0:
            pair.ingest(obj)
            continue
        ours, theirs = pair.our_scores(obj.text, t), pair.langchain_scores(obj.text, t)
        assert set(ours) == set(theirs) and len(ours) == len(pair.store)
        diff = max(abs(ours[v] - theirs[v]) for v in ours)
        assert diff < 1e-6, (obj.id, diff)
        ranking, lc_ids = pair.ask(obj.text, t)
        ids = [h.vector_id for h in ranking.hits]
        assert len(ids) == len(lc_ids) == k
        assert [ours[v] for v in lc_ids] == pytest.approx([ours[v] for v in ids], abs=1e-6)
        exact += ids == lc_ids
        if set(ids) != set(lc_ids):
            kth = sorted(ours.values(), reverse=True)[k - 1:k + 1]
            assert kth[0] == pytest.approx(kth[1], abs=1e-6), obj.id  # only a boundary tie
            boundary_ties += 1
            for d in pair.lc.memory_stream:  # re-synchronise LangChain's access times
                r = pair.store.row(d.metadata["vector_id"])
                la = pair.store.columns["last_accessed"][r]
                d.metadata["last_accessed_at"] = when(
                    pair.store.columns["created_at"][r] if np.isnan(la) else la)
        pair.last_access_parity()
    assert exact >= 0.8 * len(ds.queries)
    assert boundary_ties <= 0.1 * len(ds.queries)
