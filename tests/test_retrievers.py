"""The retriever interface (``experiments/retrievers``): SmartVector's ranking does not depend
on ``k`` at a fixed pool (library and harness) while the pool is a real parameter; the
``SearchResult`` contract; the chunk ledger of the methods that keep their own index; BM25,
reciprocal-rank fusion and Qdrant's validity filter on tiny hand-made corpora; method
parameter validation and ablation weights; and that only the oracle is shown gold labels."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from experiments.data.dataset import DocVersion, Query, load_dataset
from experiments.methods import (
    Context,
    QueryInput,
    Ranking,
    Retriever,
    kinds,
    make_params,
    make_retriever,
)
from experiments.methods.bm25 import margin_probability
from experiments.methods.hybrid import rrf, top_ranked
from experiments.methods.ledger import ChunkLedger
from experiments.methods.store_methods import (
    CosineRetriever,
    CurrentCosineReference,
    DocumentScopedReference,
)
from experiments.protocol.replay import grade_run, replay
from smartvector import HashingEmbedder, ScoringWeights, SmartVectorStore, Status, StoreConfig

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def ts(n: float) -> float:
    return day(n).timestamp()


def method(name: str, emb, cfg: StoreConfig | None = None, **override) -> Retriever:
    """A fresh retriever configured as conf/methods/<name>.yaml says (plus ``override``)."""
    node = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "methods" / f"{name}.yaml"))
    return make_retriever(name, {**node[name], **override}, Context(emb, cfg or StoreConfig()))


def ask(emb, text: str, at: float, qid: str = "q") -> QueryInput:
    return QueryInput(qid, text, emb.encode([text])[0], at)


@pytest.fixture(scope="module")
def emb() -> HashingEmbedder:
    return HashingEmbedder(dim=256)


# --- a small policy corpus with several versions -------------------------------------------

VPN_1 = ("The VPN gateway is vpn-alpha.example.com and requires the corporate client.\n\n"
         "VPN sessions time out after 8 hours of inactivity.")
VPN_2 = VPN_1.replace("vpn-alpha", "vpn-beta")  # chunk 0 changes, chunk 1 is kept
VPN_3 = (VPN_2.replace("8 hours", "4 hours")  # chunk 1 changes, chunk 2 is added
         + "\n\nSplit tunnelling is not allowed on the VPN.")
LEAVE_1 = ("Employees accrue 20 days of paid leave per year.\n\n"
           "Unused leave expires at the end of March.")
LEAVE_2 = LEAVE_1.replace("20 days", "25 days")
LEAVE_3 = "Employees accrue 25 days of paid leave per year."  # chunk 1 removed
EXPENSES_1 = "Expense reports must be filed within 30 days with receipts attached."
EXPENSES_2 = ("Expense reports must be filed within 14 days with receipts attached.\n\n"
              "Meals are reimbursed up to 50 euros per day.")
PARKING_1 = "Parking permits are issued by the facilities team each January."
FOOTER = "Questions about this policy go to the help desk."

#: (doc id, version, text, day, valid_to day or None), in time order
VERSIONS = [
    ("vpn", 1, VPN_1, 0, None),
    ("leave", 1, LEAVE_1, 5, None),
    ("expenses", 1, EXPENSES_1, 10, None),
    ("parking", 1, PARKING_1, 20, 50),
    ("footer-a", 1, FOOTER, 30, None),  # two identical chunks: their scores tie exactly
    ("footer-b", 1, FOOTER, 30, None),
    ("vpn", 2, VPN_2, 40, None),
    ("leave", 2, LEAVE_2, 60, None),
    ("expenses", 2, EXPENSES_2, 70, None),
    ("vpn", 3, VPN_3, 80, None),
    ("leave", 3, LEAVE_3, 90, None),
]

QUERIES = [
    "What is the VPN gateway address?",
    "How long until an idle VPN session times out?",
    "How many days of paid leave do employees get?",
    "When must expense reports be filed?",
    "Who issues parking permits?",
    "Where do questions about the policy go?",
]


def doc_versions(versions=VERSIONS) -> list[DocVersion]:
    return [DocVersion(d, v, text, day(t), None if end is None else day(end))
            for d, v, text, t, end in versions]


def fed_store(emb, cfg: StoreConfig | None = None) -> SmartVectorStore:
    store = SmartVectorStore(emb, "exact", cfg or StoreConfig(record_access=False))
    for v in doc_versions():
        store.add_document(v.doc_id, v.text, v.ts, version=v.version,
                           valid_to=v.valid_to_ts)
    return store


# --- SmartVector: the top-1 does not depend on k at a fixed pool ---------------------------


@pytest.mark.parametrize("at_day", [45, 100])
def test_store_top1_and_ranking_prefix_do_not_depend_on_k(emb, at_day: float) -> None:
    store = fed_store(emb)
    for text in QUERIES:
        by_k = {k: store.search(text, ts(at_day), k, pool=20).hits(k) for k in (1, 5, 10)}
        ids = {k: [h.vector_id for h in hits] for k, hits in by_k.items()}
        n_visible = len(store.search(text, ts(at_day), 1, pool=1000))
        assert n_visible >= 5
        assert len(ids[1]) == 1 and len(ids[5]) == 5 and len(ids[10]) == min(10, n_visible)
        assert ids[1] == ids[5][:1] == ids[10][:1]
        assert ids[5] == ids[10][:5]
        assert by_k[1][0].score == by_k[10][0].score
        # query() is search(...).hits(k)
        assert [h.vector_id for h in store.query(text, ts(at_day), 5, pool=20)] == ids[5]
    # the store's own pool (config.pool) is used when the call gives none
    cfg_store = fed_store(emb, StoreConfig(record_access=False, pool=3))
    assert len(cfg_store.search(QUERIES[0], ts(100), 1)) == 3


def test_harness_top1_does_not_depend_on_k(emb) -> None:
    # record_access=False makes the three runs independent. With record_access=True (live
    # queries), the top-k of each query get an access recorded (confidence reinforcement),
    # so a larger k legitimately changes the rankings of *later* queries: the k-independence
    # holds per search, not across a replay that records accesses.
    ds = load_dataset(ROOT / "datasets" / "policy_synth")
    qv = dict(zip([q.id for q in ds.queries], emb.encode([q.text for q in ds.queries]),
                  strict=True))
    cfg = StoreConfig(record_access=False)
    runs = {k: replay(ds, method("smartvector", emb, cfg), qv, k=k) for k in (1, 5, 10)}
    top1 = {k: [(p["query_id"], p["vector_id"], p["grade"]) for p in grade_run(ds, r)]
            for k, r in runs.items()}
    assert len(top1[1]) == len(ds.queries) > 0
    assert all(vid for _, vid, _ in top1[1])
    assert top1[1] == top1[5] == top1[10]
    for (_, r5), (_, r10) in zip(runs[5].run, runs[10].run, strict=True):
        assert len(r5.hits) <= 5 and len(r10.hits) <= 10
        assert [h.vector_id for h in r5.hits] == [h.vector_id for h in r10.hits][:5]

    # the pool is a real parameter: re-ranking 1 candidate (the nearest) or 50 differs
    by_pool = {}
    for pool in (1, 50):
        res = replay(ds, method("smartvector", emb, cfg, pool=pool), qv, k=5)
        assert all(len(r.hits) <= min(pool, 5) for _, r in res.run)
        by_pool[pool] = [p["vector_id"] for p in grade_run(ds, res)]
    assert sum(a != b for a, b in zip(by_pool[1], by_pool[50], strict=True)) > 0


def test_the_pool_can_change_the_store_ranking(emb) -> None:
    # the old guide is the nearest by cosine but a year old (temporal and confidence decayed);
    # the new one is less similar but fresh: re-ranking only the nearest returns the old one
    store = SmartVectorStore(emb, "exact", StoreConfig(record_access=False))
    store.add_document("old-guide", "Reset your password on the identity portal settings page.",
                       ts(0))
    store.add_document("new-guide", "Passwords are now reset by the service desk.", ts(365))
    q = "How do I reset my password on the identity portal?"
    one = store.search(q, ts(365), 1, pool=1).hits()
    many = store.search(q, ts(365), 1, pool=50).hits()
    assert [h.doc_id for h in one] == ["old-guide"]
    assert [h.doc_id for h in many] == ["new-guide", "old-guide"]
    assert many[1].semantic > many[0].semantic and many[0].score > many[1].score


# --- SearchResult ---------------------------------------------------------------------------


def test_search_result_is_ranked_by_score_then_row(emb) -> None:
    store = fed_store(emb)
    for text in QUERIES:
        res = store.search(text, ts(100), 1, pool=50)
        assert 0 < len(res) <= 50
        assert len(res.rows) == len(res.score) == len(res.status) == len(res.semantic)
        for i in range(len(res) - 1):
            s0, s1 = res.score[i], res.score[i + 1]
            assert s0 > s1 or (s0 == s1 and res.rows[i] < res.rows[i + 1])
        # the score is the configured weighted sum of the four signals
        w = np.array(store.config.weights.normalised())
        sig = np.stack([res.semantic, res.temporal, res.confidence, res.relational])
        np.testing.assert_allclose(res.score, w @ sig, rtol=1e-12, atol=1e-12)
    # the two identical footers tie exactly: the lower row comes first
    res = store.search(QUERIES[-1], ts(100), 1, pool=50)
    a, b = store.row("footer-a@v1#0"), store.row("footer-b@v1#0")
    pos = {int(r): i for i, r in enumerate(res.rows)}
    assert res.score[pos[a]] == res.score[pos[b]]
    assert a < b and pos[b] == pos[a] + 1


def test_search_result_sizes(emb) -> None:
    store = fed_store(emb)
    q = QUERIES[0]
    n_sup = int(np.sum(store.columns["superseded_at"][: len(store)] <= ts(100)))
    visible = len(store) - n_sup
    assert n_sup > 0
    for pool in (1, 3, visible, 500):
        res = store.search(q, ts(100), 2, pool=pool)
        assert len(res) == min(pool, visible) <= pool
        assert res.pool == pool
        for k in (1, 2, 7, 1000):
            assert len(res.hits(k)) == min(k, len(res))
        assert len(res.hits()) == len(res)
    # before anything was ingested at that time: an empty pool, no hits
    empty = store.search(q, ts(-1), 5, pool=10)
    assert len(empty) == 0 and empty.hits(5) == []


def test_lifecycle_false_lets_superseded_vectors_compete(emb) -> None:
    store = fed_store(emb)
    at = ts(100)
    superseded = {store.ids[r] for r in range(len(store))
                  if store.columns["superseded_at"][r] <= at}
    assert superseded == {"vpn@v1#0", "vpn@v1#1", "leave@v1#0", "leave@v1#1", "expenses@v1#0"}
    with_old = store.search("VPN gateway vpn-alpha.example.com", at, 1, pool=50,
                            lifecycle=False)
    hits = {h.vector_id: h for h in with_old.hits()}
    assert superseded <= set(hits)  # the pool covers every vector created by ``at``
    assert all(hits[v].status == Status.DEPRECATED for v in superseded)
    # by cosine alone the superseded chunk naming vpn-alpha is the best match
    semantic = store.search("VPN gateway vpn-alpha.example.com", at, 1, pool=50,
                            lifecycle=False, weights=ScoringWeights(1, 0, 0, 0))
    assert semantic.hits(1)[0].vector_id == "vpn@v1#0"
    filtered = store.search("VPN gateway vpn-alpha.example.com", at, 1, pool=50)
    assert not ({h.vector_id for h in filtered.hits()} & superseded)
    assert Status.DEPRECATED not in set(filtered.status.tolist())
    # ... and in force, its replacement is
    semantic = store.search("VPN gateway vpn-alpha.example.com", at, 1, pool=50,
                            weights=ScoringWeights(1, 0, 0, 0))
    assert semantic.hits(1)[0].vector_id == "vpn@v2#0"


def test_search_rejects_a_bad_pool_or_k(emb) -> None:
    store = fed_store(emb)
    for pool in (0, -3, True, 2.5):
        with pytest.raises(ValueError, match="pool"):
            store.search(QUERIES[0], ts(100), 5, pool=pool)
    for k in (0, -1):
        with pytest.raises(ValueError, match="k must be >= 1"):
            store.search(QUERIES[0], ts(100), k)
        with pytest.raises(ValueError, match="k must be >= 1"):
            store.query(QUERIES[0], ts(100), k)


# --- ChunkLedger ----------------------------------------------------------------------------


def test_ledger_ids_and_ends_match_the_store(emb) -> None:
    store = fed_store(emb)
    led = ChunkLedger(store.config.max_chunk_chars)
    for v in doc_versions():
        led.add(v)
    assert led.ids == store.ids
    assert len(led) == len(store) == 14
    c = store.columns
    n = len(store)
    np.testing.assert_array_equal(led.created, c["created_at"][:n])
    np.testing.assert_array_equal(led.valid_from, c["valid_from"][:n])
    np.testing.assert_array_equal(led.ends, np.minimum(c["valid_to"][:n], c["superseded_at"][:n]))
    assert led.doc_of == store.doc_of and led.texts == store.texts
    # visibility with validity is the store's "in force" at every time
    for d in (-1, 0, 19.5, 20, 30, 40, 49.9, 50, 75, 80, 90, 100):
        at = ts(d)
        created = c["created_at"][:n] <= at
        in_force = (c["valid_from"][:n] <= at) & (at < np.minimum(c["valid_to"][:n],
                                                                  c["superseded_at"][:n]))
        assert led.created_by(at) == int(created.sum())
        np.testing.assert_array_equal(led.visible(at, validity=True),
                                      in_force[: led.created_by(at)])
        assert led.visible(at, validity=False).all()
        assert len(led.visible(at, validity=False)) == int(created.sum())


def test_ledger_surgical_update(emb) -> None:
    led = ChunkLedger()
    v1, v2, v3 = (DocVersion("vpn", i, t, day(d)) for i, t, d in
                  ((1, VPN_1, 0), (2, VPN_2, 40), (3, VPN_3, 80)))
    assert led.add(v1) == ([0, 1], [])
    assert led.ids == ["vpn@v1#0", "vpn@v1#1"]
    new, changed = led.add(v2)
    # chunk 0 changed: a new row, the old one ends now; chunk 1 keeps its row (and its id)
    assert new == [2] and sorted(changed) == [0, 1]
    assert led.ids == ["vpn@v1#0", "vpn@v1#1", "vpn@v2#0"]
    assert led.docs["vpn"].rows == [2, 1]
    assert led.ends == [ts(40), math.inf, math.inf]
    new, changed = led.add(v3)
    assert led.ids[3:] == ["vpn@v3#1", "vpn@v3#2"] and new == [3, 4]
    assert sorted(changed) == [1, 2]
    assert led.docs["vpn"].rows == [2, 3, 4]
    assert led.ends == [ts(40), ts(80), math.inf, math.inf, math.inf]
    # created_by counts rows created by a time (inclusive)
    assert [led.created_by(ts(d)) for d in (-1, 0, 39, 40, 79, 80, 1000)] == [0, 2, 2, 3, 3, 5, 5]
    # in force: valid_from <= at < min(valid_to, superseded)
    assert led.visible(ts(39), True).tolist() == [True, True]
    assert led.visible(ts(40), True).tolist() == [False, True, True]
    assert led.visible(ts(80), True).tolist() == [False, False, True, True, True]
    assert led.visible(ts(80), False).tolist() == [True] * 5


def test_ledger_validity_window_and_removed_chunks() -> None:
    led = ChunkLedger()
    led.add(DocVersion("parking", 1, PARKING_1, day(20), day(50)))
    assert led.ends == [ts(50)]
    assert led.visible(ts(49), True).tolist() == [True]
    assert led.visible(ts(50), True).tolist() == [False]  # the window is half-open
    assert led.visible(ts(50), False).tolist() == [True]
    led.add(DocVersion("leave", 2, LEAVE_2, day(60)))
    led.add(DocVersion("leave", 3, LEAVE_3, day(90)))  # chunk 1 removed, chunk 0 kept
    assert led.ids == ["parking@v1#0", "leave@v2#0", "leave@v2#1"]
    assert led.ends[1:] == [math.inf, ts(90)]
    assert led.visible(ts(90), True).tolist() == [False, True, False]


def test_ledger_time_travel_into_a_validity_gap_matches_the_live_state() -> None:
    # v1 is in force over [day 0, day 10); v2, with the same text, from day 20: between day
    # 10 and day 20 no version is in force
    v1 = DocVersion("notice", 1, "The lab is closed for renovation.", day(0), day(10))
    v2 = DocVersion("notice", 2, "The lab is closed for renovation.", day(20))
    live = ChunkLedger()
    live.add(v1)
    travel = ChunkLedger()
    travel.add(v1)
    travel.add(v2)
    assert live.visible(ts(15), True).tolist() == [False]
    assert travel.visible(ts(15), True).tolist() == [False]
    assert travel.visible(ts(25), True).tolist() == [False, True]  # re-issued: a new row
    # the store does the same: the re-issued chunk is a new vector, the old one keeps its end
    store = SmartVectorStore(HashingEmbedder(dim=64), "exact",
                             StoreConfig(record_access=False))
    for v in (v1, v2):
        store.add_document(v.doc_id, v.text, v.ts, version=v.version, valid_to=v.valid_to_ts)
    assert store.columns["valid_to"].tolist() == [ts(10), math.inf]
    assert store.query("lab closed", ts(15), k=1)[0].temporal == 0.05  # outside any window


# --- BM25 -----------------------------------------------------------------------------------

SMALL = [
    ("office", 1, "The office opens at nine in the morning on weekdays.", 0, None),
    ("lunch", 1, "The cafeteria serves lunch at noon on weekdays.", 0, None),
    ("parking", 1, "Parking permits are issued by the facilities team.", 1, None),
    ("vpn", 1, "The VPN gateway address is alpha dot example dot com.", 2, None),
    ("vpn", 2, "The VPN gateway address is beta dot example dot com.", 10, None),
]


def fed(name: str, emb, **override) -> Retriever:
    r = method(name, emb, **override)
    for v in doc_versions(SMALL):
        r.ingest(v)
    return r


def ids_of(ranking: Ranking) -> list[str]:
    return [h.vector_id for h in ranking.hits]


@pytest.mark.parametrize("name", ["bm25", "bm25_lifecycle"])
def test_bm25_ranks_the_rare_word_first(emb, name: str) -> None:
    r = fed(name, emb)
    assert r.size == 5
    res = r.search(ask(emb, "Who issues parking permits?", ts(20)), ts(20), 5)
    assert ids_of(res) == ["parking@v1#0"]  # no other chunk shares a query term
    assert res.hits[0].score > 0 and res.probability == 1.0
    res = r.search(ask(emb, "When does the office open on weekdays?", ts(20)), ts(20), 5)
    assert ids_of(res)[:2] == ["office@v1#0", "lunch@v1#0"]  # "weekdays" is in both
    s = [h.score for h in res.hits]
    assert s == sorted(s, reverse=True)
    assert res.probability == pytest.approx(s[0] / (s[0] + s[1]))
    # nothing shares a word with the query: no hits, no probability
    res = r.search(ask(emb, "zebra xylophone", ts(20)), ts(20), 5)
    assert res.hits == [] and math.isnan(res.probability)


def test_bm25_lifecycle_never_returns_a_superseded_chunk(emb) -> None:
    plain, life = fed("bm25", emb), fed("bm25_lifecycle", emb)
    q = "What is the alpha VPN gateway address?"
    # after version 2: the plain index still ranks the superseded chunk (it has "alpha") first
    assert ids_of(plain.search(ask(emb, q, ts(20)), ts(20), 5)) == ["vpn@v1#0", "vpn@v2#0"]
    assert ids_of(life.search(ask(emb, q, ts(20)), ts(20), 5)) == ["vpn@v2#0"]
    for d in (10, 11, 30):
        for text in (q, "VPN gateway address", "alpha"):
            assert "vpn@v1#0" not in ids_of(life.search(ask(emb, text, ts(d)), ts(d), 5))
    # time travel: before version 2 both see version 1 only
    for r in (plain, life):
        assert ids_of(r.search(ask(emb, q, ts(5)), ts(5), 5)) == ["vpn@v1#0"]
    # k bounds the hits
    assert len(plain.search(ask(emb, "the weekdays VPN", ts(20)), ts(20), 2).hits) == 2


def test_margin_probability() -> None:
    assert margin_probability(np.array([3.0, 1.0])) == 0.75
    assert margin_probability(np.array([1.0, 0.0, 3.0])) == 0.75  # order does not matter
    assert margin_probability(np.array([2.0, 2.0, 1.0])) == 0.5
    assert margin_probability(np.array([0.0, 4.0, -1.0])) == 1.0  # one positive score
    assert math.isnan(margin_probability(np.array([0.0, 0.0])))
    assert math.isnan(margin_probability(np.array([])))


# --- reciprocal-rank fusion and the hybrid ---------------------------------------------------


def test_rrf_numbers() -> None:
    s = rrf([np.array([0, 1]), np.array([1, 0])], 3, 60)
    assert s[0] == s[1] == pytest.approx(1 / 61 + 1 / 62)
    assert s[2] == 0.0
    s = rrf([np.array([2, 0, 1]), np.array([0])], 4, 60)
    assert s.tolist() == pytest.approx([1 / 62 + 1 / 61, 1 / 63, 1 / 61, 0.0])
    assert rrf([np.array([1])], 2, 0).tolist() == [0.0, 1.0]
    assert rrf([], 2, 60).tolist() == [0.0, 0.0]
    # top_ranked: descending score, ties by lower row, at most depth
    scores = np.array([0.5, 0.9, 0.5, 0.1])
    assert top_ranked(scores, np.array([3, 2, 1, 0]), 3).tolist() == [1, 0, 2]
    assert top_ranked(scores, np.array([2, 3]), 5).tolist() == [2, 3]


def test_hybrid_returns_only_chunks_in_force(emb) -> None:
    r = fed("hybrid_rrf", emb)
    q = "What is the alpha VPN gateway address?"
    before = r.search(ask(emb, q, ts(5)), ts(5), 5)
    # version 1 is first in both lists: the best possible fused score, probability 1
    assert ids_of(before)[0] == "vpn@v1#0" and "vpn@v2#0" not in ids_of(before)
    assert before.hits[0].score == pytest.approx(2 / 61) and before.probability == 1.0
    after = r.search(ask(emb, q, ts(20)), ts(20), 5)
    assert ids_of(after)[0] == "vpn@v2#0" and "vpn@v1#0" not in ids_of(after)
    led = r.ledger
    for d in (2, 5, 10, 20):
        mask = led.visible(ts(d), True)
        for text in (q, "Who issues parking permits?", "lunch at noon"):
            res = r.search(ask(emb, text, ts(d)), ts(d), 5)
            assert res.hits
            for h in res.hits:
                row = led.ids.index(h.vector_id)
                assert row < len(mask) and mask[row]
            s = [h.score for h in res.hits]
            assert s == sorted(s, reverse=True)
    # without the validity filter the superseded chunk competes again
    plain = fed("hybrid_rrf", emb, validity=False)
    assert "vpn@v1#0" in ids_of(plain.search(ask(emb, q, ts(20)), ts(20), 5))


def test_hybrid_cosines_equal_a_fresh_computation_over_the_whole_prefix(emb) -> None:
    """Row norms are kept as rows arrive (ingests and queries interleaved), yet every
    query's cosines are those computed from scratch over the rows created by then, bit for
    bit; a matrix of unnormalised rows (and an all-zero row) included."""
    r = method("hybrid_rrf", emb)
    rng = np.random.default_rng(3)
    q = rng.normal(size=emb.dim).astype(np.float32)
    for i, v in enumerate(doc_versions(SMALL)):
        r.ingest(v)
        r._vectors = [m * np.float32(1 + i) for m in r._vectors]  # unnormalised rows
        if i == 2:
            r._vectors.append(np.zeros((1, emb.dim), np.float32))
        n_pending = sum(len(m) for m in r._vectors)
        full = np.concatenate([r._matrix, *r._vectors])
        for n in (len(full), max(1, len(full) - n_pending)):
            m = full[:n]
            norms = np.linalg.norm(m, axis=1) * float(np.linalg.norm(q))
            want = (m @ q).astype(np.float64) / np.where(norms > 0, norms, 1.0)
            assert np.array_equal(r._cosine(q, n), want)
    assert len(r._norms) == len(r._matrix) == len(full)


# --- Qdrant with a validity payload filter ---------------------------------------------------


def test_qdrant_filter_follows_validity(emb) -> None:
    pytest.importorskip("qdrant_client", reason="qdrant_filter needs qdrant-client "
                        "(pip install -e '.[peers]')")
    r = fed("qdrant_filter", emb)
    assert r.size == 5
    q = "What is the VPN gateway address?"
    before = ids_of(r.search(ask(emb, q, ts(5)), ts(5), 5))
    assert before[0] == "vpn@v1#0" and "vpn@v2#0" not in before
    after = r.search(ask(emb, q, ts(20)), ts(20), 5)
    assert ids_of(after)[0] == "vpn@v2#0" and "vpn@v1#0" not in ids_of(after)
    # the score is Qdrant's cosine of the query and the chunk
    v = emb.encode([q, "The VPN gateway address is beta dot example dot com."])
    cos = float(v[0] @ v[1] / np.linalg.norm(v[0]) / np.linalg.norm(v[1]))
    assert after.hits[0].score == pytest.approx(cos, abs=1e-5)
    # before anything was ingested: no hits
    assert r.search(ask(emb, q, ts(-1)), ts(-1), 5).hits == []
    # without the filter the superseded chunk competes (created-by-time still applies)
    plain = fed("qdrant_filter", emb, validity=False)
    assert "vpn@v1#0" in ids_of(plain.search(ask(emb, q, ts(20)), ts(20), 5))
    assert "vpn@v2#0" not in ids_of(plain.search(ask(emb, q, ts(5)), ts(5), 5))


def test_qdrant_archives_closed_windows_and_brings_back_a_reopened_one(emb) -> None:
    """Points whose window has closed by the latest ingestion sit in the archive collection;
    a query at that time searches the live one alone, one "as of" an earlier time the archive
    too. A chunk carried over into a version that starts the instant its window closed (and
    after another document's ingestion at that instant archived it) comes back."""
    pytest.importorskip("qdrant_client", reason="qdrant_filter needs qdrant-client "
                        "(pip install -e '.[peers]')")
    r = method("qdrant_filter", emb)
    text = "Visitors sign in at the front desk and wear a badge."
    r.ingest(DocVersion("visitors", 1, text, day(0), day(10)))  # in force over [0, 10)
    r.ingest(DocVersion("vpn", 1, VPN_1, day(10)))  # the same instant: visitors#0 closed
    assert r.archived == [True, False, False]
    assert set(r.query_filters(ts(10))) == {r.COLLECTION}
    assert set(r.query_filters(ts(5))) == {r.ARCHIVE}  # only visitors#0 was in force
    assert ids_of(r.search(ask(emb, "Where do visitors sign in?", ts(5)), ts(5), 5)) == [
        "visitors@v1#0"]
    # v2 starts when v1's window ended and keeps its text: the same row, open-ended again
    r.ingest(DocVersion("visitors", 2, text, day(10)))
    assert r.archived == [False, False, False] and r.ledger.ends[0] == math.inf
    assert set(r.query_filters(ts(10))) == {r.COLLECTION}
    hits = r.search(ask(emb, "Where do visitors sign in?", ts(10)), ts(10), 5)
    assert ids_of(hits)[0] == "visitors@v1#0"
    points, _ = r.client.scroll(r.ARCHIVE, limit=10)
    assert points == []
    # with validity off every point stays selected at later times: nothing is archived
    plain = method("qdrant_filter", emb, validity=False)
    plain.ingest(DocVersion("visitors", 1, text, day(0), day(10)))
    plain.ingest(DocVersion("vpn", 1, VPN_1, day(10)))
    assert plain.archived == [False, False, False]


# --- parameters -----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "node", "match"), [
    ("mine", {"kind": "smartvector", "bogus": 1}, r"^methods\.mine: unknown key 'bogus'"),
    ("mine", {"kind": "smartvector", "pool": 0}, r"^methods\.mine: pool must be"),
    ("mine", {"kind": "smartvector", "drop": ["speed"]}, r"^methods\.mine: unknown signal"),
    ("mine", {"kind": "smartvector", "weights": {"speed": 1}},
     r"^methods\.mine: weights: unknown signal"),
    ("mine", {"kind": "bm25", "k1": -1}, r"^methods\.mine: k1 must be"),
    ("mine", {"kind": "bm25", "k1": "high"}, r"^methods\.mine: "),
    ("mine", {"kind": "hybrid_rrf", "depth": 0}, r"^methods\.mine: depth must be"),
    ("mine", {"kind": "time_weighted", "decay_rate": 2}, r"^methods\.mine: decay_rate"),
    ("mine", {"kind": "ref_current_cosine", "pool": 5}, r"^methods\.mine: unknown key 'pool'"),
    ("mine", {"kind": "teleport"}, r"^methods\.mine\.kind: unknown retriever kind 'teleport'"),
    ("teleport", {}, r"^methods\.teleport\.kind: unknown retriever kind"),
])
def test_make_params_errors_name_the_method(name: str, node: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match) as e:
        make_params(name, node)
    assert "\n" not in str(e.value)


def test_every_shipped_method_config_is_valid() -> None:
    for path in sorted((ROOT / "conf" / "methods").glob("*.yaml")):
        node = OmegaConf.to_container(OmegaConf.load(path))
        assert list(node) == [path.stem]
        cls, params = make_params(path.stem, node[path.stem])
        assert cls.kind == node[path.stem].get("kind", path.stem)
        assert dataclasses.is_dataclass(params)


def test_ablation_weights_derive_from_the_store_weights(emb) -> None:
    cfg = StoreConfig(weights=ScoringWeights(1, 2, 3, 4))
    assert method("smartvector", emb, cfg).weights == ScoringWeights(1, 2, 3, 4)
    assert method("no_temporal", emb, cfg).weights == ScoringWeights(1, 0, 3, 4)
    assert method("no_relational", emb, cfg).weights == ScoringWeights(1, 2, 3, 0)
    assert method("only_semantic", emb, cfg).weights == ScoringWeights(1, 0, 0, 0)
    assert method("only_temporal", emb, cfg).weights == ScoringWeights(0, 2, 0, 0)
    # explicit weights override the store's, then drop applies
    r = method("no_temporal", emb, cfg, weights={"semantic": 9})
    assert r.weights == ScoringWeights(9, 0, 3, 4)
    assert r.recorded_params.items() >= {
        "pool": 50, "weights.semantic": 9.0, "weights.temporal": 0.0,
        "weights.confidence": 3.0, "weights.relational": 4.0}.items()
    # a method's own store override of the weights is what its ablation derives from
    r = method("no_temporal", emb, StoreConfig(), store={"weights": dict(
        semantic=1, temporal=2, confidence=3, relational=4)})
    assert r.weights == ScoringWeights(1, 0, 3, 4)
    # pool: null means the store's pool
    assert method("smartvector", emb, StoreConfig(pool=7), pool=None).pool == 7
    # an ablation leaving no weight is a one-line error naming the method
    with pytest.raises(ValueError, match=r"^methods\.only_temporal: weights"):
        method("only_temporal", emb, StoreConfig(weights=ScoringWeights(1, 0, 1, 1)))


def test_ablation_scores_use_the_derived_weights(emb) -> None:
    r = method("only_semantic", emb, StoreConfig(record_access=False))
    for v in doc_versions():
        r.ingest(v)
    res = r.search(ask(emb, QUERIES[0], ts(100)), ts(100), 5)
    assert [h.score for h in res.hits] == [h.signals["semantic"] for h in res.hits]
    s = [h.score for h in res.hits]
    assert s == sorted(s, reverse=True) and len(s) == 5


# --- only the references see gold labels -------------------------------------------------------


class _Spy:
    """Records the gold query every search receives."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.gold: list[tuple[str, Query | None]] = []

    def search(self, query: QueryInput, at: float, k: int, gold: Query | None = None
               ) -> Ranking:
        self.gold.append((query.id, gold))
        return super().search(query, at, k, gold)


class SpyOracle(_Spy, CurrentCosineReference):
    pass


class SpyScoped(_Spy, DocumentScopedReference):
    pass


class SpyCosine(_Spy, CosineRetriever):
    pass


def test_only_the_references_need_gold() -> None:
    assert sorted(k for k, cls in kinds().items() if cls.needs_gold) == [
        "ref_current_cosine", "ref_document_scoped"]
    # what a retriever sees of a query has no gold field
    assert [f.name for f in dataclasses.fields(QueryInput)] == ["id", "text", "vector",
                                                                "asked_at"]


@pytest.mark.parametrize("mode", ["replay", "time_travel"])
@pytest.mark.parametrize("spy", [SpyOracle, SpyScoped])
def test_replay_passes_gold_only_to_the_references(emb, mode: str, spy: type) -> None:
    ds = load_dataset(ROOT / "datasets" / "example")
    qv = dict(zip([q.id for q in ds.queries], emb.encode([q.text for q in ds.queries]),
                  strict=True))
    cfg = StoreConfig(record_access=False)
    oracle = spy("reference", spy.Params(), Context(emb, cfg))
    cosine = SpyCosine("plain_cosine", CosineRetriever.Params(), Context(emb, cfg))
    res_o = replay(ds, oracle, qv, mode=mode)
    res_c = replay(ds, cosine, qv, mode=mode)
    ids = sorted(q.id for q in ds.queries)
    assert len(ids) == 2
    assert sorted(qid for qid, _ in oracle.gold) == ids
    for qid, gold in oracle.gold:
        assert isinstance(gold, Query) and gold.id == qid
    assert sorted(qid for qid, _ in cosine.gold) == ids
    assert all(gold is None for _, gold in cosine.gold)
    # a reference with its gold answers every example query correctly
    assert [p["grade"] for p in grade_run(ds, res_o)] == ["correct", "correct"]
    assert len(grade_run(ds, res_c)) == 2
    # and it refuses to answer without gold
    with pytest.raises(ValueError, match="gold"):
        oracle.search(ask(emb, ds.queries[0].text, ds.queries[0].ts), ds.queries[0].ts, 5)
