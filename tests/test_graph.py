"""Typed edges with times, and the bounded-BFS ripple, on its own and inside a store."""

from __future__ import annotations

import numpy as np
import pytest

from smartvector import ConsolidationParams, RippleParams, SmartVectorStore, StoreConfig
from smartvector.graph import EdgeGraph, ripple
from smartvector.timeutil import DAY, to_ts

P = RippleParams()


def chain(n: int) -> EdgeGraph:
    """0 <- 1 <- 2 <- ... : node i + 1 depends on node i."""
    g = EdgeGraph()
    for i in range(n - 1):
        g.link_dependency(i + 1, i, 0.0)
    return g


# ----------------------------------------------------------------------------- edges
def test_dependency_edges_go_both_ways_once():
    g = EdgeGraph()
    assert g.link_dependency(1, 0, 5.0) is True
    assert g.link_dependency(1, 0, 6.0) is False  # duplicate
    assert g.link_dependency(2, 2, 5.0) is False  # no self dependency
    assert g.neighbours("depends_on", 1) == [0]
    assert g.neighbours("depended_by", 0) == [1]
    assert g.neighbours("depends_on", 2) == [] and g.neighbours("depended_by", 2) == []
    assert g.count(("depends_on", "depended_by"), 0) == 1


def test_edges_are_filtered_by_time():
    g = EdgeGraph()
    g.link_dependency(1, 0, 10.0)
    g.link_dependency(2, 0, 20.0)
    assert g.neighbours("depended_by", 0, at=5.0) == []
    assert g.neighbours("depended_by", 0, at=10.0) == [1]
    assert g.neighbours("depended_by", 0, at=25.0) == [1, 2]
    assert g.count(("depended_by",), 0, at=15.0) == 1


def test_contradicts_is_symmetric_and_supersedes_has_an_inverse():
    g = EdgeGraph()
    assert g.link_contradicts(3, 4, 1.0) is True
    assert g.link_contradicts(4, 3, 2.0) is False
    assert g.neighbours("contradicts", 3) == [4] and g.neighbours("contradicts", 4) == [3]
    g.link_supersedes(9, 8, 1.0)
    assert g.neighbours("supersedes", 9) == [8] and g.neighbours("superseded_by", 8) == [9]


def test_graph_dict_round_trip():
    g = chain(4)
    g.link_contradicts(0, 3, 7.5)
    g.link_supersedes(5, 1, 8.0)
    h = EdgeGraph.from_dict(g.to_dict())
    assert h.to_dict() == g.to_dict()
    assert h.neighbours("depended_by", 1, at=0.0) == [2]
    assert h.neighbours("contradicts", 3, at=7.0) == []


def graph_with_contradicts(rng: np.random.Generator, n: int, m: int) -> EdgeGraph:
    """A graph loaded with ``m`` random contradicts edges among ``n`` rows, some one-way
    (as a loaded file may hold), duplicates dropped."""
    adj: dict[str, list[tuple[int, float]]] = {}
    for x, y in rng.integers(0, n, (m, 2)).tolist():
        lst = adj.setdefault(str(x), [])
        if all(o != y for o, _ in lst):
            lst.append((y, float(rng.integers(0, 3))))
    return EdgeGraph.from_dict({"contradicts": adj})


def test_bulk_contradicts_links_equal_one_link_after_another():
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 12))
        base = graph_with_contradicts(rng, n, int(rng.integers(0, 12)))
        # repeated pairs, both directions, a row with itself
        pairs = rng.integers(0, n, (int(rng.integers(0, 30)), 2))
        one, bulk = EdgeGraph.from_dict(base.to_dict()), EdgeGraph.from_dict(base.to_dict())
        want = [one.link_contradicts(x, y, 4.0) for x, y in pairs.tolist()]
        got = bulk.link_contradicts_many(pairs[:, 0], pairs[:, 1], 4.0)
        assert got.dtype == bool and got.tolist() == want
        assert bulk.to_dict() == one.to_dict()  # same neighbours, in the same order, times
        assert list(bulk.to_dict()["contradicts"]) == list(one.to_dict()["contradicts"])


def test_hub_rows_keep_the_same_lists_and_answers_as_a_scan():
    """Rows with many edges of a kind test a new edge against a set of their targets instead
    of scanning the list: every call answers as a scan would, and the lists (targets, times,
    order) are the same, with bulk contradiction links and a loaded graph in the mix."""
    from smartvector import graph as graph_module

    rng = np.random.default_rng(7)
    g, ref = EdgeGraph(), {k: {} for k in graph_module.KINDS}

    def ref_add(kind, a, b, at):
        lst = ref[kind].setdefault(a, [])
        if any(o == b for o, _ in lst):
            return False
        lst.append((b, at))
        return True

    for step in range(4000):
        hub = int(rng.integers(0, 3))  # rows 0-2 get hundreds of edges
        a = hub if rng.random() < 0.7 else int(rng.integers(0, 60))
        b = int(rng.integers(0, 120))
        at = float(step)
        op = rng.random()
        if op < 0.4:
            g.link_supersedes(a, b, at)
            ref_add("supersedes", a, b, at), ref_add("superseded_by", b, a, at)
        elif op < 0.7:
            if a != b:
                assert g.link_dependency(a, b, at) == ref_add("depends_on", a, b, at)
                ref_add("depended_by", b, a, at)
        elif op < 0.85:
            assert g.link_contradicts(a, b, at) == ref_add("contradicts", a, b, at)
            ref_add("contradicts", b, a, at)
        else:
            xs = np.array([a, *rng.integers(0, 3, 4)])
            ys = rng.integers(0, 120, len(xs))
            want = []
            for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
                want.append(ref_add("contradicts", x, y, at))
                ref_add("contradicts", y, x, at)
            assert g.link_contradicts_many(xs, ys, at).tolist() == want
        if step == 2000:  # a saved and loaded graph builds its sets again when needed
            g = EdgeGraph.from_dict(g.to_dict())
    assert any(len(v) > graph_module._SCAN for adj in ref.values() for v in adj.values())
    assert g.to_dict() == {k: {str(r): v for r, v in adj.items()} for k, adj in ref.items()}


def test_has_many_equals_has():
    rng = np.random.default_rng(6)
    for _ in range(200):
        n = int(rng.integers(1, 15))
        g = graph_with_contradicts(rng, n, int(rng.integers(0, 20)))
        a, b = rng.integers(0, n + 3, (2, int(rng.integers(0, 40))))  # rows without edges too
        assert g.has_many("contradicts", a, b).tolist() == [
            g.has("contradicts", x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)]
        assert not g.has_many("depends_on", a, b).any()


# ---------------------------------------------------------------------------- ripple
def test_ripple_penalties_by_depth():
    # direct dependents (depth 0) take 0.15, theirs (depth 1) 0.075, nothing beyond
    assert ripple(chain(5), 0, P) == [(1, 0, 0.15), (2, 1, 0.075)]
    assert ripple(chain(5), 3, P) == [(4, 0, 0.15)]
    assert ripple(chain(5), 4, P) == []


def test_ripple_depth_and_penalty_are_configurable():
    out = ripple(chain(6), 0, RippleParams(penalty=0.3, max_depth=4))
    assert [(r, d) for r, d, _ in out] == [(1, 0), (2, 1), (3, 2), (4, 3)]
    np.testing.assert_allclose([p for *_, p in out], [0.3, 0.15, 0.1, 0.075], atol=1e-15)
    assert ripple(chain(3), 0, RippleParams(max_depth=0)) == []


def test_ripple_follows_only_depended_by():
    g = chain(3)
    assert ripple(g, 2, P) == []  # what 2 depends on is not penalised
    g.link_contradicts(0, 5, 0.0)
    g.link_supersedes(6, 0, 0.0)
    assert ripple(g, 0, P) == [(1, 0, 0.15), (2, 1, 0.075)]


def test_ripple_terminates_on_cycles_and_never_hits_the_source():
    g = EdgeGraph()
    g.link_dependency(1, 0, 0.0)
    g.link_dependency(2, 1, 0.0)
    g.link_dependency(0, 2, 0.0)  # 0 depends on 2: a 3-cycle
    assert ripple(g, 0, P) == [(1, 0, 0.15), (2, 1, 0.075)]
    g2 = EdgeGraph()
    g2.link_dependency(1, 0, 0.0)
    g2.link_dependency(0, 1, 0.0)  # 2-cycle
    assert ripple(g2, 0, RippleParams(max_depth=10)) == [(1, 0, 0.15)]


def test_diamond_gives_one_penalty_per_node():
    g = EdgeGraph()
    for dependent, target in [(1, 0), (2, 0), (3, 1), (3, 2)]:
        g.link_dependency(dependent, target, 0.0)
    assert ripple(g, 0, P) == [(1, 0, 0.15), (2, 0, 0.15), (3, 1, 0.075)]


def test_shortcut_gives_the_penalty_of_the_shallowest_depth():
    g = EdgeGraph()
    g.link_dependency(1, 0, 0.0)
    g.link_dependency(2, 1, 0.0)
    g.link_dependency(2, 0, 0.0)  # 2 is both a direct and a second-hand dependent of 0
    assert ripple(g, 0, P) == [(1, 0, 0.15), (2, 0, 0.15)]


def test_ripple_only_uses_edges_that_existed_at_the_time():
    g = EdgeGraph()
    g.link_dependency(1, 0, 10.0)
    g.link_dependency(2, 1, 20.0)
    assert ripple(g, 0, P, at=5.0) == []
    assert ripple(g, 0, P, at=15.0) == [(1, 0, 0.15)]
    assert ripple(g, 0, P, at=20.0) == [(1, 0, 0.15), (2, 1, 0.075)]


# ------------------------------------------------------------------------ in a store
TOPICS = {
    "a": "Alpha servers run the billing pipeline overnight.",
    "b": "Beta dashboards read the billing pipeline results.",
    "c": "Gamma reports summarise the beta dashboards weekly.",
    "d": "Delta alerts fire when gamma reports look wrong.",
}


@pytest.fixture
def chain_store(make_store) -> SmartVectorStore:
    """d -> c -> b -> a (``depends_on``), edges built by a consolidation."""
    cfg = StoreConfig(consolidation=ConsolidationParams(dependency_similarity=-1.0))
    store = make_store(config=cfg)
    deps = {"a": (), "b": ("a",), "c": ("b",), "d": ("c",)}
    for doc, text in TOPICS.items():
        store.add_document(doc, text, "2024-01-01", source_type="policy_doc",
                           depends_on=deps[doc])
    report = store.consolidate("2024-01-02")
    assert report.dependency_edges == 3 and report.contradictions == 0
    return store


def test_consolidation_builds_the_chain(chain_store):
    s = chain_store
    assert s.get("b@v1#0").edges.depends_on == ("a@v1#0",)
    assert s.get("a@v1#0").edges.depended_by == ("b@v1#0",)
    assert s.get("d@v1#0").edges.depended_by == ()
    np.testing.assert_array_equal(
        s.relational_edges_at(np.arange(4), "2024-01-02"), [1, 2, 2, 1])
    np.testing.assert_array_equal(
        s.relational_edges_at(np.arange(4), "2024-01-01T12:00"), [0, 0, 0, 0])


def test_store_ripple_records_events_and_lowers_confidence_by_the_penalty(chain_store):
    s = chain_store
    t = to_ts("2024-01-10")
    rows = np.array([s.row(f"{d}@v1#0") for d in "abcd"])
    before = s.confidence_at(rows, t)
    assert s.propagate(s.row("a@v1#0"), t) == 2
    after = s.confidence_at(rows, t)
    np.testing.assert_allclose(before - after, [0.0, 0.15, 0.075, 0.0], atol=1e-12)
    rip = [(e.at, e.kind, e.delta, e.detail) for e in s.history("b@v1#0") if e.kind == "ripple"]
    assert rip == [(t, "ripple", -0.15, "from a@v1#0 at depth 0")]
    rip = [(e.kind, e.delta, e.detail) for e in s.history("c@v1#0") if e.kind == "ripple"]
    assert rip == [("ripple", -0.075, "from a@v1#0 at depth 1")]
    assert not [e for e in s.history("d@v1#0") if e.kind == "ripple"]
    assert not [e for e in s.history("a@v1#0") if e.kind == "ripple"]
    # the penalty stays: a day later b is still 0.15 below an unpenalised twin
    later = t + DAY
    decayed = s.engine.compute(0.9, (later - to_ts("2024-01-01")) / DAY)
    assert float(s.confidence_at(rows[1:2], later)[0]) == pytest.approx(
        float(decayed) - 0.15, abs=1e-12)


def test_store_ripple_before_the_edges_existed_penalises_nobody(chain_store):
    s = chain_store
    assert s.propagate(s.row("a@v1#0"), "2024-01-01T06:00") == 0
