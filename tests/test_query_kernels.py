"""The compiled query path (smartvector.kernels, the count log) against the numpy reference:
same order, same signals up to the last bit of exp2/log1p, same store state afterwards."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from smartvector import HnswIndex, ScoringWeights, SmartVectorStore, StoreConfig
from smartvector.config import ConfidenceParams, TemporalParams
from smartvector.countlog import UNORDERED, CountLog
from smartvector.embedders import HashingEmbedder
from smartvector.query import Candidates
from smartvector.scoring import combine
from smartvector.timeutil import DAY

DIM = 32
T0 = 1_700_000_000.0


def random_store(seed: int, config: StoreConfig | None = None, index: str = "exact",
                 docs: int = 40, feedback: bool = True
                 ) -> tuple[SmartVectorStore, np.random.Generator]:
    """Documents over 200 days with new versions, feedback (unless not ``feedback``: then
    every row's counting events are in time order), accesses, penalties, dependency edges
    and consolidation passes, at random times."""
    rng = np.random.default_rng(seed)
    idx = HnswIndex(DIM, ef_search=16) if index == "hnsw" else index
    store = SmartVectorStore(HashingEmbedder(dim=DIM), idx, config or StoreConfig())
    centres = rng.standard_normal((5, DIM))
    for day in range(0, 200, 10):
        at = T0 + day * DAY
        ids = [f"d{rng.integers(docs)}" for _ in range(4)]
        ids = list(dict.fromkeys(ids))
        texts, doc_ids, emb = [], [], []
        for d in ids:
            for j in range(int(rng.integers(1, 4))):
                texts.append(f"{d} chunk {j} says {int(rng.integers(1, 9)) * 15} days")
                doc_ids.append(d)
                emb.append(centres[int(d[1:]) % 5] + 0.6 * rng.standard_normal(DIM))
        deps = {ids[0]: [ids[-1]]} if len(ids) > 1 else None
        store.add_vectors(np.array(emb), texts, doc_ids, at,
                          source_type=str(rng.choice(["wiki", "slack", "policy_doc"])),
                          depends_on=deps)
        n = len(store)
        for r in rng.choice(n, size=min(n, 6), replace=False).tolist() * feedback:
            store.feedback(store.ids[r], bool(rng.random() < 0.6), at + rng.uniform(0, 5) * DAY)
        store.record_access(rng.choice(n, size=min(n, 5), replace=False), at + DAY)
        if day % 40 == 30:
            store.consolidate(at + 2 * DAY)
    return store, rng


def reference_rank(store: SmartVectorStore, cand: Candidates, weights=None):
    """The numpy path: signals, combine, lexsort, status_at."""
    sig = store.signals(cand)
    score = combine(weights or store.config.weights, **sig)
    order = np.lexsort((cand.rows, -score))
    return (cand.rows[order], score[order], {k: v[order] for k, v in sig.items()},
            store.status_at(cand.rows[order], cand.at))


CONFIGS = [
    StoreConfig(),
    StoreConfig(temporal=TemporalParams(anchor="validity", half_life_days=40.0),
                confidence=ConfidenceParams(anchor="validity", half_life_days=20.0)),
]


@pytest.mark.parametrize("config", CONFIGS, ids=["created", "validity"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kernel_rank_matches_numpy_reference_in_time_travel(config, seed):
    store, rng = random_store(seed, config)
    weights = [None, ScoringWeights(0.1, 0.5, 0.3, 0.1), ScoringWeights(1, 0, 0, 0)]
    checked_late = 0
    for _ in range(40):
        at = T0 + rng.uniform(-5, 215) * DAY
        q = rng.standard_normal(DIM)
        w = weights[int(rng.integers(len(weights)))]
        cand = store.candidates(q, at, int(rng.integers(1, 30)), bool(rng.random() < 0.8))
        late = store.columns["last_event_at"][cand.rows] > cand.at
        checked_late += int(late.any())
        got = store.rank(cand, w)
        rows, score, sig, status = reference_rank(store, cand, w)
        np.testing.assert_array_equal(got.rows, rows)
        np.testing.assert_allclose(got.score, score, rtol=0, atol=1e-12)
        for name, values in sig.items():
            np.testing.assert_allclose(getattr(got, name), values, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(got.status, status)
    assert checked_late >= 5  # the count log's "as of" lookups were exercised


def test_out_of_order_counting_events_fall_back_to_a_replay():
    store, rng = random_store(3)
    rows = np.arange(len(store))
    late_at = T0 + 300 * DAY
    store.feedback(store.ids[0], True, late_at)
    store.feedback(store.ids[0], False, T0 + 50 * DAY)  # earlier than the last one: unordered
    assert store.counts.head[0] == UNORDERED
    for at in (T0 + 40 * DAY, T0 + 60 * DAY, late_at + 1):
        cand = Candidates(rows[:12], np.linspace(0.9, 0.3, 12), at, store)
        got = store.rank(cand)
        ref_rows, ref_score, _, _ = reference_rank(store, cand)
        np.testing.assert_array_equal(got.rows, ref_rows)
        np.testing.assert_allclose(got.score, ref_score, rtol=0, atol=1e-12)


def test_count_log_totals_equal_a_replay_of_the_events():
    store, rng = random_store(4)
    log = store.counts
    ordered = np.flatnonzero(log.head[: len(store)] != UNORDERED)
    assert 0 < len(ordered) < len(store)  # both kinds occur (feedback lands out of order)
    assert (log.head[ordered] >= 0).sum() > 20
    for at in T0 + np.array([-1, 0, 35, 101.5, 199, 400]) * DAY:
        pos, neg, acc, pen = store._counts_at(np.arange(len(store)), at)
        for r in ordered.tolist():
            k = int(log.head[r])
            while k >= 0 and log.values[4, k] > at:
                k = int(log.prev[k])
            expect = (0.0, 0.0, 0.0, 0.0) if k < 0 else tuple(log.values[:4, k])
            assert expect == (pos[r], neg[r], acc[r], pen[r])  # bit for bit
    rebuilt = CountLog.from_events(len(store), store.events)  # as after loading

    def chain(lg: CountLog, r: int) -> list[tuple[float, ...]]:
        k, out = int(lg.head[r]), []
        while k >= 0:
            out.append(tuple(lg.values[:, k]))
            k = int(lg.prev[k])
        return out

    assert rebuilt.n == log.n
    for r in range(len(store)):
        assert (rebuilt.head[r] == UNORDERED) == (log.head[r] == UNORDERED)
        assert chain(rebuilt, r) == chain(log, r)


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_fast_search_equals_the_general_path_and_leaves_the_same_state(index):
    fast, rng = random_store(5, index=index)
    slow = copy.deepcopy(fast)
    for _ in range(60):
        at = T0 + rng.uniform(0, 230) * DAY
        q = rng.standard_normal(DIM)
        pool, k = int(rng.integers(1, 25)), int(rng.integers(1, 8))
        record = bool(rng.random() < 0.5)
        got = fast.search(None, at, k, vector=q, pool=pool, record_access=record)
        cand = slow.candidates(q, at, pool)
        ref = slow.rank(cand, None, pool)
        if record:
            slow.record_access(ref.rows[:k], at)
        np.testing.assert_array_equal(got.rows, ref.rows)
        np.testing.assert_array_equal(got.score, ref.score)
        np.testing.assert_array_equal(got.status, ref.status)
        assert got.pool == ref.pool == pool and got.at == ref.at
    for name in ("accesses", "last_accessed", "last_event_at"):
        np.testing.assert_array_equal(fast.columns[name], slow.columns[name])
    assert fast.events == slow.events
    np.testing.assert_array_equal(fast.counts.values[:, : fast.counts.n],
                                  slow.counts.values[:, : slow.counts.n])


def test_search_reorders_tied_similarities_by_row():
    store = SmartVectorStore(HashingEmbedder(dim=DIM), HnswIndex(DIM))
    v = np.ones(DIM)
    store.add_vectors(np.tile(v, (6, 1)), [f"chunk {i}" for i in range(6)],
                      [f"d{i}" for i in range(6)], T0)
    res = store.search(None, T0 + DAY, 3, vector=v, pool=6, record_access=False)
    np.testing.assert_array_equal(res.rows, np.arange(6))  # every signal ties: row order


@pytest.mark.parametrize("bad, problem", [(np.zeros(DIM), "zero norm"),
                                          (np.full(DIM, np.nan), "non-finite values")])
@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_unusable_query_vectors_are_refused_and_change_nothing(bad, problem, index):
    store, _ = random_store(6, index=index, docs=10)
    before = store.columns["accesses"].copy()
    with pytest.raises(ValueError, match=problem):
        store.search(None, T0 + 100 * DAY, 3, vector=bad, record_access=True)
    with pytest.raises(ValueError, match="shape"):
        store.search(None, T0 + 100 * DAY, 3, vector=np.ones(DIM + 1))
    np.testing.assert_array_equal(store.columns["accesses"], before)


def test_record_access_out_of_range_raises_and_changes_nothing():
    store, _ = random_store(7, docs=10)
    before, n_log = store.columns["accesses"].copy(), store.counts.n
    for rows in ([0, len(store)], [-1]):
        with pytest.raises(IndexError, match="out of range"):
            store.record_access(np.array(rows), T0 + 300 * DAY)
    np.testing.assert_array_equal(store.columns["accesses"], before)
    assert store.counts.n == n_log


def test_loaded_store_searches_the_past_like_the_original(tmp_path):
    store, rng = random_store(8)
    store.save(tmp_path / "s")
    loaded = SmartVectorStore.load(tmp_path / "s", HashingEmbedder(dim=DIM))
    for _ in range(20):
        at, q = T0 + rng.uniform(0, 220) * DAY, rng.standard_normal(DIM)
        a = store.search(None, at, 5, vector=q, pool=15, record_access=False)
        b = loaded.search(None, at, 5, vector=q, pool=15, record_access=False)
        np.testing.assert_array_equal(a.rows, b.rows)
        np.testing.assert_array_equal(a.score, b.score)


def test_copied_and_pickled_columns_stay_views_of_their_blocks():
    import pickle

    store, _ = random_store(9, docs=10)
    for twin in (copy.deepcopy(store), pickle.loads(pickle.dumps(store))):
        twin.record_access(np.array([0, 1]), T0 + 400 * DAY)  # written through the blocks
        assert twin.columns["accesses"][0] == store.columns["accesses"][0] + 1
        assert twin.columns["last_accessed"][1] == T0 + 400 * DAY
        np.testing.assert_array_equal(twin.columns["created_at"], store.columns["created_at"])


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_search_batch_equals_successive_searches(index):
    one, rng = random_store(10, index=index)
    batch = copy.deepcopy(one)
    Q = rng.standard_normal((50, DIM))
    ats = T0 + rng.uniform(0, 230, 50) * DAY
    ats[:20] = T0 + 230 * DAY  # a shared "now" for some: one index search serves them
    for record in (False, True):
        got = batch.search_batch(Q, ats, 3, pool=7, record_access=record)
        want = [one.search(None, a, 3, vector=q, pool=7, record_access=record)
                for q, a in zip(Q, ats, strict=True)]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g.rows, w.rows)
            np.testing.assert_allclose(g.score, w.score, rtol=0, atol=1e-6 if index == "exact"
                                       else 0)
    np.testing.assert_array_equal(batch.columns["accesses"], one.columns["accesses"])
    assert batch.events == one.events
    single_time = batch.search_batch(Q[:4], T0 + 100 * DAY, 2, record_access=False)
    assert [r.at for r in single_time] == [T0 + 100 * DAY] * 4


def test_search_batch_refuses_bad_shapes():
    store, _ = random_store(11, docs=10)
    with pytest.raises(ValueError, match="2-D"):
        store.search_batch(np.ones(DIM), T0)
    with pytest.raises(ValueError, match="3 times for 2 query vectors"):
        store.search_batch(np.ones((2, DIM)), [T0, T0, T0])
    with pytest.raises(ValueError, match="pool must be"):
        store.search_batch(np.ones((2, DIM)), T0, pool=0)


def test_count_log_jump_pointers_find_totals_in_log_steps():
    """A vector counted thousands of times (an often retrieved chunk): "as of t" lookups
    follow jump pointers, O(log n) steps, and find what a step-by-step walk finds."""
    from smartvector import kernels

    rng = np.random.default_rng(7)
    log = CountLog(rows=3)
    times = np.sort(rng.uniform(0, 1000, 3000)).round(0)  # many equal times too
    kinds = rng.choice(["access", "accepted", "corrected", "ripple"], len(times),
                       p=[0.85, 0.05, 0.05, 0.05])
    for at, kind in zip(times.tolist(), kinds.tolist(), strict=True):
        log.add(1, at, kind, -0.1)
        log.add(2, at + 0.5, "access", 0.0)
    links = log.links

    def walk(r: int, t: float, jumps: bool) -> tuple[int, int]:
        k, steps = int(log.head[r]), 0
        while k >= 0 and log.values[4, k] > t:
            j = int(links[1, k])
            k = j if jumps and j >= 0 and log.values[4, j] > t else int(links[0, k])
            steps += 1
        return k, steps

    floats = np.full((3, len(kernels.FIELDS)), np.inf)  # every row: events after any t
    ints = np.zeros((3, len(kernels.FIELDS)), np.int32)
    queries = np.concatenate([[-1.0, 0.0, 0.5, 999.5, 1000.0, 2000.0],
                              rng.uniform(-5, 1005, 300), rng.choice(times, 50)])
    for t in queries.tolist():
        for r in (1, 2):
            linear, n_linear = walk(r, t, jumps=False)
            fast, n_fast = walk(r, t, jumps=True)
            assert fast == linear
            assert n_fast <= 4 * np.log2(3000) + 4  # ~47, where the linear walk takes up to 3000
            tot, ok = kernels._totals(np.array([r]), t, floats, ints, np.empty((4, 0)),
                                      log.head, log.values, links)
            expect = np.zeros(4) if linear < 0 else log.values[:4, linear]
            assert ok and np.array_equal(tot[:, 0], expect)
    assert max(walk(1, t, jumps=False)[1] for t in (-1.0, 10.0)) > 2900  # the chain is long


def test_edge_counts_as_of_a_time_equal_the_graphs(tmp_path):
    """The compiled count of relational edges made by a time (the graph's chains of edge
    times) equals the graph's own count, edges made out of time order included, and again
    after saving and loading."""
    from smartvector import kernels

    store, rng = random_store(12)
    n = len(store)
    for _ in range(30):  # dependencies made at earlier times than edges already there
        a, b = (int(x) for x in rng.choice(n, 2, replace=False))
        store.graph.link_dependency(a, b, T0 + rng.uniform(0, 200) * DAY)
    store.refresh_edge_counts(range(n), T0 + 210 * DAY)
    loaded_dir = tmp_path / "s"
    store.save(loaded_dir)
    loaded = SmartVectorStore.load(loaded_dir, HashingEmbedder(dim=DIM))
    rows = np.arange(n)
    c = store.columns
    assert (c["edges_changed_at"] > T0).sum() > 20  # many rows have edges with a history
    for at in T0 + np.array([-1, 0, 10, 35.5, 99, 150, 205, 210, 400]) * DAY:
        want = store.relational_edges_at(rows, at)
        for s in (store, loaded):
            got = kernels.relational_edges_at(rows, at, s.columns.block("f8"),
                                              s.columns.block("i4"),
                                              *s.graph.relational_times)
            np.testing.assert_array_equal(got, want)
    assert store.relational_edges_at(rows, T0 + 400 * DAY).sum() > 60


def recorded_search_codes(monkeypatch) -> list[int]:
    """The codes :func:`kernels.search_one` returns from now on, in call order."""
    from smartvector import kernels

    codes: list[int] = []
    search_one = kernels.search_one
    monkeypatch.setattr(kernels, "search_one",
                        lambda *a: codes.append((out := search_one(*a))[0]) or out)
    return codes


def test_late_edges_rank_in_the_compiled_call(monkeypatch):
    """A pool with edges made after the query's time is ranked by the compiled call (not
    the general path), with the general path's result."""
    fast, rng = random_store(13, feedback=False)
    n, late_at = len(fast), T0 + 195 * DAY
    for _ in range(60):  # dependencies found late, between rows of every age
        a, b = (int(x) for x in rng.choice(n, 2, replace=False))
        fast.graph.link_dependency(a, b, late_at)
    fast.refresh_edge_counts(range(n), late_at)
    slow = copy.deepcopy(fast)
    codes = recorded_search_codes(monkeypatch)
    late = 0
    for _ in range(120):
        at = T0 + rng.uniform(0, 200) * DAY
        q = rng.standard_normal(DIM)
        cand = slow.candidates(q, at, 10)
        got = fast.search(None, at, 3, vector=q, pool=10, record_access=False)
        ref = slow.rank(cand, None, 10)
        np.testing.assert_array_equal(got.rows, ref.rows)
        np.testing.assert_array_equal(got.score, ref.score)
        np.testing.assert_array_equal(got.relational, ref.relational)
        if (slow.columns["edges_changed_at"][cand.rows] > at).any():
            assert codes[-1] != 2  # not left to the general path
            late += codes[-1] == 0  # ranked by the compiled call (after any widening)
    assert late >= 10


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_widened_searches_rank_in_the_compiled_call(index, monkeypatch):
    """When the first fetch holds too few visible rows (the query's neighbours are mostly
    rows created later), the compiled call searches again on a wider fetch and returns the
    general path's pool and scores, recording the same accesses."""
    rng = np.random.default_rng(21)
    idx = HnswIndex(DIM, ef_search=16) if index == "hnsw" else index
    fast = SmartVectorStore(HashingEmbedder(dim=DIM), idx, StoreConfig())
    centre = rng.standard_normal(DIM)
    spread = rng.standard_normal((40, DIM))  # visible from day 0, far from the centre
    fast.add_vectors(spread, [f"old {i}" for i in range(40)], [f"o{i}" for i in range(40)], T0)
    near = centre + 0.3 * rng.standard_normal((400, DIM))  # the centre's neighbours: later
    fast.add_vectors(near, [f"new {i}" for i in range(400)], [f"n{i}" for i in range(400)],
                     T0 + 100 * DAY)
    slow = copy.deepcopy(fast)
    codes = recorded_search_codes(monkeypatch)
    widened = 0
    for i in range(30):
        at = T0 + (10 + i) * DAY
        q = centre + 0.3 * rng.standard_normal(DIM)
        codes.clear()
        got = fast.search(None, at, 3, vector=q, pool=10, record_access=True)
        ref = slow.rank(slow.candidates(q, at, 10), None, 10)
        slow.record_access(ref.rows[:3], at)
        np.testing.assert_array_equal(got.rows, ref.rows)
        np.testing.assert_array_equal(got.score, ref.score)
        assert len(got.rows) == 10 and (got.rows < 40).all()  # only the visible rows
        assert codes[-1] == 0  # the compiled call ranked it
        widened += codes[0] == 1 and len(codes) > 1
    assert widened == 30  # every query needed a wider fetch
    np.testing.assert_array_equal(fast.columns["accesses"], slow.columns["accesses"])
    assert fast.events == slow.events
