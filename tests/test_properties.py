"""Property-based tests (hypothesis): ranges of every signal, ripple, lifecycle monotonicity."""

from __future__ import annotations

from collections import deque

import numpy as np
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from smartvector import (
    ConfidenceParams,
    ConsolidationParams,
    HashingEmbedder,
    RelationalParams,
    RippleParams,
    ScoringWeights,
    SmartVectorStore,
    Status,
    StoreConfig,
    TemporalParams,
)
from smartvector.confidence import ConfidenceEngine
from smartvector.graph import EdgeGraph, ripple
from smartvector.scoring import combine, relational_signal, temporal_signal
from smartvector.timeutil import DAY

SETTINGS = settings(max_examples=100, deadline=None)
finite = st.floats(allow_nan=False, allow_infinity=False)
unit = st.floats(0.0, 1.0)


# ------------------------------------------------------------------------- confidence
@st.composite
def confidence_params(draw) -> ConfidenceParams:
    return ConfidenceParams(
        half_life_days=draw(st.floats(1e-3, 1e4)),
        positive_boost=draw(st.floats(0, 1)),
        negative_penalty=draw(st.floats(0, 1)),
        access_reinforcement=draw(st.floats(0, 1)),
        access_cap=draw(st.floats(0, 1)),
        floor=draw(st.floats(0, 0.99)),
    )


@SETTINGS
@given(confidence_params(), finite, finite, finite, finite, finite, finite)
def test_confidence_always_between_floor_and_one(params, base, age, pos, neg, acc, pen):
    with np.errstate(over="ignore"):  # age / half-life may overflow to inf: decays to 0
        c = float(ConfidenceEngine(params).compute(base, age, pos, neg, acc, pen))
    assert params.floor <= c <= 1.0


@SETTINGS
@given(st.lists(st.tuples(unit, st.floats(0, 1e4), st.integers(0, 50), st.integers(0, 50),
                          st.integers(0, 10**9), st.floats(0, 2)), min_size=1, max_size=20))
def test_confidence_vectorised_matches_scalar(rows):
    e = ConfidenceEngine()
    cols = [np.array(c) for c in zip(*rows, strict=True)]
    vec = e.compute(*cols)
    assert vec.shape == (len(rows),)
    for v, r in zip(vec, rows, strict=True):
        assert v == float(e.compute(*r))
        assert 0.01 <= v <= 1.0


# --------------------------------------------------------------------------- signals
@SETTINGS
@given(
    st.floats(-1e15, 1e15), st.floats(-1e15, 1e15),
    st.one_of(st.just(-np.inf), st.floats(-1e15, 1e15)),
    st.one_of(st.just(np.inf), st.floats(-1e15, 1e15)),
    st.floats(1e-3, 1e6), unit,
)
def test_temporal_in_unit_interval(at, created, vf, vt, half_life, outside):
    p = TemporalParams(half_life_days=half_life, outside_window=outside)
    v = float(temporal_signal(at, created, vf, vt, p))
    assert 0.0 <= v <= 1.0
    if not (vf <= at < vt):
        assert v == outside
    elif at <= created:
        assert v == 1.0


@SETTINGS
@given(st.integers(-10, 10**15), st.floats(0, 10), st.floats(0, 10))
def test_relational_in_zero_to_cap(n, scale, cap):
    v = float(relational_signal(n, RelationalParams(scale=scale, cap=cap)))
    assert 0.0 <= v <= cap


weight = st.floats(0, 1e308)


@SETTINGS
@given(weight, weight, weight, weight,
       st.lists(st.tuples(unit, unit, unit, unit), min_size=1, max_size=10))
def test_combine_of_unit_signals_stays_in_unit_interval(a, b, c, d, signals):
    assume(max(a, b, c, d) > 0)
    w = ScoringWeights(a, b, c, d)
    s, t, cf, r = (np.array(x) for x in zip(*signals, strict=True))
    out = combine(w, s, t, cf, r)
    assert np.all((out >= 0.0) & (out <= 1.0))
    # and it is a convex combination: between the smallest and largest signal, up to rounding
    stacked = np.stack([s, t, cf, r])
    assert np.all(out <= stacked.max(axis=0) + 1e-12)
    assert np.all(out >= stacked.min(axis=0) - 1e-12)


# ----------------------------------------------------------------------------- ripple
def reference_ripple(edges, source, max_depth, penalty, at):
    """Shortest depended_by distance by plain BFS over the first-made edge of each pair."""
    first: dict[tuple[int, int], float] = {}
    for dependent, target, t in edges:
        if dependent != target:
            first.setdefault((dependent, target), t)
    dependents: dict[int, list[int]] = {}
    for (dependent, target), t in first.items():
        if t <= at:
            dependents.setdefault(target, []).append(dependent)
    dist = {source: 0}
    q = deque([source])
    while q:
        v = q.popleft()
        for d in dependents.get(v, ()):
            if d not in dist:
                dist[d] = dist[v] + 1
                q.append(d)
    return {n: (k - 1, penalty / k) for n, k in dist.items() if 1 <= k <= max_depth}


@SETTINGS
@given(
    st.integers(1, 12).flatmap(lambda n: st.tuples(
        st.just(n),
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.integers(0, 10)),
                 max_size=40),
        st.integers(0, n - 1))),
    st.integers(0, 5), unit, st.integers(0, 11),
)
def test_ripple_terminates_once_per_node_within_depth(graph, max_depth, penalty, at):
    n, edges, source = graph
    g = EdgeGraph()
    for dependent, target, t in edges:
        added = g.link_dependency(dependent, target, float(t))
        if dependent == target:
            assert added is False  # no self loops
    params = RippleParams(penalty=penalty, max_depth=max_depth)
    out = ripple(g, source, params, float(at))
    nodes = [r for r, _, _ in out]
    assert len(nodes) == len(set(nodes))  # never twice
    assert source not in nodes
    assert all(0 <= d < max_depth for _, d, _ in out)
    assert [d for _, d, _ in out] == sorted(d for _, d, _ in out)  # breadth first
    expected = reference_ripple(edges, source, max_depth, penalty, at)
    assert {r: (d, p) for r, d, p in out} == expected


# -------------------------------------------------------------------------- lifecycle
TOPICS = [
    "Passwords must be rotated every {} days for all accounts.",
    "Backups are kept for {} days in the secondary region.",
    "Laptops lock the screen after {} minutes of inactivity.",
    "Incidents must be reported within {} hours to security.",
    "Visitors may stay at most {} hours inside the building.",
]
NUMBERS = [2, 30, 60, 90]
SOURCES = ["policy_doc", "wiki", "slack", "email", "official_db"]
STAMPS = ("created_at", "consolidated_at", "dormant_at", "superseded_at", "archived_at")
ORDER = {int(s): s for s in Status}


def paragraph(i: int) -> str:
    return TOPICS[i % len(TOPICS)].format(NUMBERS[(i // len(TOPICS)) % len(NUMBERS)])


op = st.tuples(
    st.sampled_from(["add", "update", "update", "consolidate", "consolidate", "feedback",
                     "query"]),
    st.integers(0, 10**6),
    st.lists(st.integers(0, 19), min_size=1, max_size=4),
    st.one_of(st.just(0.0), st.floats(0.1, 15.0)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(op, min_size=1, max_size=25))
def test_lifecycle_only_moves_forward(ops):
    cfg = StoreConfig(
        confidence=ConfidenceParams(half_life_days=4.0),
        consolidation=ConsolidationParams(archive_after_days=3.0, dependency_similarity=0.2,
                                          contradiction_similarity=0.5),
    )
    store = SmartVectorStore(HashingEmbedder(dim=64), "exact", cfg)
    t = 0.0
    times: list[float] = []
    docs: list[str] = []
    seen: dict[int, dict[str, float]] = {}
    for kind, pick, paras, dt in ops:
        t += dt * DAY
        times.append(t)
        text = "\n\n".join(paragraph(i) for i in paras)
        if kind == "add" or (kind == "update" and not docs):
            doc = f"d{len(docs)}"
            deps = [docs[pick % len(docs)]] if docs and pick % 2 else []
            store.add_document(doc, text, t, source_type=SOURCES[pick % len(SOURCES)],
                               depends_on=deps)
            docs.append(doc)
        elif kind == "update":
            store.add_document(docs[pick % len(docs)], text, t)
        elif kind == "consolidate":
            store.consolidate(t)
        elif kind == "feedback" and len(store):
            store.feedback(store.ids[pick % len(store)], bool(pick % 3), t)
        elif kind == "query" and len(store):
            for h in store.query(text, t, k=3):
                assert h.status in (Status.UNCONSOLIDATED, Status.ACTIVE, Status.DORMANT)

        c = store.columns
        for r in range(len(store)):
            now = {k: float(c[k][r]) for k in STAMPS}
            # a timestamp, once set, never changes
            for k, v in seen.get(r, {}).items():
                if np.isfinite(v):
                    assert now[k] == v, (store.ids[r], k)
            seen[r] = now
            # and the lifecycle order holds between them
            assert now["created_at"] <= now["consolidated_at"] <= now["dormant_at"]
            assert now["created_at"] <= now["superseded_at"] <= now["archived_at"]
            if np.isfinite(now["dormant_at"]):  # only a live, consolidated vector decays
                assert np.isfinite(now["consolidated_at"])
                assert now["dormant_at"] <= now["superseded_at"]
            # nothing happens to a vector before it exists
            assert all(e.at >= now["created_at"] for e in store.history(store.ids[r]))

    if not len(store):
        return
    rows = np.arange(len(store))
    probe = sorted(set(times) | {x + 1.0 for x in times} | {times[0] - 1.0})
    statuses = np.stack([store.status_at(rows, x) for x in probe])  # (times, rows)
    assert np.all(np.diff(statuses.astype(int), axis=0) >= 0)
    for r in rows.tolist():
        col = statuses[:, r]
        assert col[0] == -1  # before everything
        for s in set(col.tolist()) - {-1}:
            event(f"reached {Status(s).name}")
        # the events that record each transition sit at the transition's time
        kinds = {e.kind: e.at for e in store.history(store.ids[r])}
        for kind, stamp in [("promoted", "consolidated_at"), ("dormant", "dormant_at"),
                            ("deprecated", "superseded_at"), ("archived", "archived_at")]:
            v = float(store.columns[stamp][r])
            assert (kind in kinds) == bool(np.isfinite(v))
            if kind in kinds:
                assert kinds[kind] == v
        evs = [e.at for e in store.history(store.ids[r])]
        assert evs == sorted(evs)
