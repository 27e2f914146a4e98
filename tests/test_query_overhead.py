"""The query path's shortcuts: access events queued by searches and appended in batches
(``store.events``), and search results built without the frozen dataclass's ``__init__``."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from smartvector import HnswIndex, SmartVectorStore
from smartvector import store as store_module
from smartvector.embedders import HashingEmbedder
from smartvector.timeutil import DAY
from smartvector.vector import Event

DIM = 16
T0 = 1_700_000_000.0


def small_store(seed: int = 0, n: int = 40) -> tuple[SmartVectorStore, np.random.Generator]:
    rng = np.random.default_rng(seed)
    store = SmartVectorStore(HashingEmbedder(dim=DIM), HnswIndex(DIM, ef_search=32))
    store.add_vectors(rng.standard_normal((n, DIM)), [f"chunk {i}" for i in range(n)],
                      [f"d{i // 4}" for i in range(n)], T0,
                      depends_on={"d1": ["d0"], "d3": ["d2"]})
    return store, rng


def immediate_events(store: SmartVectorStore, steps) -> dict[int, list[Event]]:
    """The events after ``steps``, reading ``store.events`` after each one (so nothing stays
    queued: the order of logging every access as it happens)."""
    for step in steps:
        step(store)
        store.events  # noqa: B018 (the read appends what is queued)
    return store.events


def workload(rng: np.random.Generator, store: SmartVectorStore) -> list:
    """Recorded searches at increasing times, with feedback, penalties, a consolidation and
    new vectors in between (events of other kinds land between queued accesses)."""
    steps = []
    ids = list(store.ids)
    for i in range(30):
        at = T0 + (i + 1) * DAY
        q = rng.standard_normal(DIM)
        steps.append(lambda s, q=q, at=at: s.search(None, at, 3, vector=q, pool=5,
                                                    record_access=True))
        if i % 4 == 1:
            vid = ids[int(rng.integers(len(ids)))]
            steps.append(lambda s, vid=vid, at=at: s.feedback(vid, True, at + 0.5))
        if i % 7 == 3:
            row = int(rng.integers(len(ids)))
            steps.append(lambda s, row=row, at=at: s.penalise(row, 0.05, at + 0.7, "ripple",
                                                             "test"))
        if i == 12:
            steps.append(lambda s, at=at: s.consolidate(at + 0.9))
        if i == 20:
            v = rng.standard_normal((2, DIM))
            steps.append(lambda s, v=v, at=at: s.add_vectors(v, ["new a", "new b"],
                                                              ["d1", "d1"], at + 0.8))
        rows = rng.choice(len(ids), 3, replace=False)
        steps.append(lambda s, rows=rows, at=at: s.record_access(rows, at + 0.2))
    return steps


def test_queued_access_events_equal_events_logged_as_they_happen():
    base, rng = small_store(0)
    steps = workload(rng, base)
    eager = copy.deepcopy(base)
    lazy = copy.deepcopy(base)
    want = immediate_events(eager, steps)
    for step in steps:
        step(lazy)
    assert lazy._pending_access  # accesses were queued, not yet appended
    assert lazy.events == want
    assert not lazy._pending_access
    n_access = sum(e.kind == "access" for evs in want.values() for e in evs)
    assert n_access == 30 * 3 + 30 * 3  # every recorded search and record_access call
    for name in ("accesses", "last_accessed", "last_event_at", "penalty", "positive"):
        np.testing.assert_array_equal(lazy.columns[name], eager.columns[name])
    assert all(lazy.history(v) == eager.history(v) for v in lazy.ids)


def test_history_orders_accesses_around_other_events():
    store, rng = small_store(1)
    q = rng.standard_normal(DIM)
    t1, t2, t3 = T0 + DAY, T0 + 2 * DAY, T0 + 3 * DAY
    # k = pool: every row of the pool (the 4 nearest, whatever the feedback) is accessed
    first = store.search(None, t1, 4, vector=q, pool=4, record_access=True)
    vid = store.ids[int(first.rows[0])]
    store.feedback(vid, False, t2)  # logged while the first access is still queued
    store.search(None, t3, 4, vector=q, pool=4, record_access=True)
    kinds = [(e.at, e.kind) for e in store.history(vid)][-3:]
    assert kinds == [(t1, "access"), (t2, "corrected"), (t3, "access")]


def test_the_queue_is_bounded(monkeypatch):
    monkeypatch.setattr(store_module, "_FLUSH_ACCESSES", 3)
    store, rng = small_store(2)
    for i in range(10):
        store.search(None, T0 + i * DAY, 2, vector=rng.standard_normal(DIM), pool=4,
                     record_access=True)
        assert len(store._pending_access) < 3
    appended = sum(e.kind == "access" for evs in store._events.values() for e in evs)
    assert appended == 9 * 2  # three full queues of three searches, two rows each


def test_assigning_events_does_not_carry_queued_accesses_over():
    store, rng = small_store(3)
    store.search(None, T0 + DAY, 2, vector=rng.standard_normal(DIM), pool=4,
                 record_access=True)
    old = store._events
    store.events = {}
    assert store.events == {}
    assert sum(e.kind == "access" for evs in old.values() for e in evs) == 2  # went to the old


def test_saved_store_keeps_the_queued_accesses(tmp_path):
    store, rng = small_store(4)
    for i in range(5):
        store.search(None, T0 + (i + 1) * DAY, 3, vector=rng.standard_normal(DIM), pool=5,
                     record_access=True)
    assert store._pending_access
    store.save(tmp_path / "s")
    loaded = SmartVectorStore.load(tmp_path / "s", HashingEmbedder(dim=DIM))
    assert loaded.events == store.events
    assert sum(e.kind == "access" for evs in loaded.events.values() for e in evs) == 15


@pytest.mark.parametrize("at", [0.0, -0.0])
def test_access_events_at_zero_keep_their_sign(at):
    store, rng = small_store(5)
    store.record_access(np.array([0]), 0.0)
    store.record_access(np.array([1]), at)
    got = [e.at for r in (0, 1) for e in store.events[r] if e.kind == "access"]
    assert [np.copysign(1, x) for x in got] == [1.0, np.copysign(1, at)]


def test_search_results_are_the_frozen_dataclass_the_constructor_builds():
    store, rng = small_store(6)
    store.feedback(store.ids[3], True, T0 + DAY / 2)  # signals that differ by row
    q, at = rng.standard_normal(DIM), T0 + 40 * DAY
    res = store.search(None, at, 3, vector=q, pool=6, record_access=False)
    cand = store.candidates(q, at, 6)
    ref = store.signals(cand)  # the numpy reference, in candidate order
    pos = [cand.rows.tolist().index(r) for r in res.rows.tolist()]
    for name in ("semantic", "temporal", "confidence", "relational"):
        np.testing.assert_allclose(getattr(res, name), ref[name][pos], rtol=0, atol=1e-12)
    rebuilt = dataclasses.replace(res)  # through SearchResult.__init__
    assert repr(res) == repr(rebuilt)
    for f in dataclasses.fields(res):
        a, b = getattr(res, f.name), getattr(rebuilt, f.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        else:
            assert a is b or a == b
    assert list(vars(res)) == [f.name for f in dataclasses.fields(res)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.pool = 1


def test_queued_accesses_do_not_follow_later_changes_to_the_result_rows():
    store, rng = small_store(7)
    res = store.search(None, T0 + DAY, 2, vector=rng.standard_normal(DIM), pool=4,
                       record_access=True)
    accessed = res.rows[:2].tolist()
    res.rows[:] = res.rows[::-1].copy()  # the caller reuses the array before events are read
    res.rows[:2] = [r for r in range(len(store)) if r not in accessed][:2]
    got = sorted(r for r, evs in store.events.items() for e in evs if e.kind == "access")
    assert got == sorted(accessed)
