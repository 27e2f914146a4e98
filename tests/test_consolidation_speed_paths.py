"""The consolidation pass's fast paths give the plain code's results: the quantity regex and
its bulk scan, the vectorised resolution, the search in locality order and blocks, the bounded
search, and the bulk edges, penalties, ripples and count log."""

from __future__ import annotations

import copy
import dataclasses
import random
import re

import numpy as np
import pytest
from test_bulk import T0, knowledge_base, reference_consolidate, state

from smartvector import HashingEmbedder, SmartVectorStore, consolidation
from smartvector.consolidation import (
    _locality_order,
    _resolve_many,
    _search,
    claims,
    claims_many,
    resolve,
)
from smartvector.countlog import CountLog
from smartvector.index import make_index
from smartvector.timeutil import DAY

#: the quantity pattern as first written (the module spells it to be scanned faster)
PLAIN = re.compile(r"(?<![\w.])(\$?\d+(?:[.,]\d+)*)\s*(%|[a-z]+)?", re.IGNORECASE)


def test_quantity_pattern_finds_what_the_plain_pattern_finds():
    rng = random.Random(0)
    alphabet = ["a", "b", "1", "2", "9", " ", ".", ",", "$", "%", "s", "S", "D", "x", "_",
                "\n", "\u017f", "\u212a", "\u0663", "days", "12.5", "$3,000", "v2"]
    texts = ["", "$", "$$5", "a$5", "x.5 days", "5.5.5 kg", "1,000 USD", "e.g.5 days",
             "$ 5", "5$5 s", "Rotate every 90 days."]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25)))
              for _ in range(30000)]
    for text in texts:
        assert consolidation._QUANTITY.findall(text) == PLAIN.findall(text), text


def test_resolve_many_equals_resolve():
    rng = np.random.default_rng(3)
    store = SmartVectorStore(HashingEmbedder(dim=32), "exact")
    n = 60
    texts = [f"text {i}" for i in range(n)]
    store.add_vectors(rng.standard_normal((n, 32)), texts, [f"d{i}" for i in range(n)],
                      0.0)
    c = store.columns
    # few distinct values, so that every criterion ties often
    c["created_at"][:] = rng.integers(0, 3, n).astype(float)
    c["authority"][:] = rng.choice([0.2, 0.5, 0.6, 0.9], n)
    c["positive"][:] = rng.integers(0, 2, n)
    c["negative"][:] = rng.integers(0, 2, n)
    a, b = rng.integers(0, n, 500), rng.integers(0, n, 500)
    a, b = a[a != b], b[a != b]
    for resolution in ("majority", "authority_margin"):
        store.config = dataclasses.replace(store.config, consolidation=dataclasses.replace(
            store.config.consolidation, resolution=resolution))
        winner, loser, why = _resolve_many(store, a, b)
        assert list(zip(winner.tolist(), loser.tolist(), why, strict=True)) == [
            resolve(store, x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)]


@pytest.mark.parametrize("kind", ["exact", "hnsw"])
def test_search_in_locality_order_and_blocks_equals_one_search(kind, monkeypatch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3000, 16)).astype(np.float32)
    x[1000:1010] = x[0]  # ties
    index = make_index(kind, 16)
    index.add(np.arange(len(x)), x)
    vectors = index.get_vectors(np.arange(len(x)))
    rows = rng.permutation(len(x))[:2000]
    want = index.search(vectors[rows], 7)
    order = _locality_order(vectors, rows)
    assert sorted(order.tolist()) == list(range(len(rows)))
    monkeypatch.setattr(consolidation, "_ORDER_MIN", 1)
    monkeypatch.setattr(consolidation, "_SEARCH_BLOCK", 333)
    got = _search(index, vectors, rows, 7, None)  # the exact index: one batch, as it is
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    if kind == "hnsw":  # a bounded search uses its own ef, then restores the index's
        _search(index, vectors, rows, 7, 7)
        assert index.ef_search == 64


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_consolidation_in_locality_order_equals_the_plain_loops(index, monkeypatch):
    """As test_bulk's comparison, with the locality order and blocks used at any size."""
    monkeypatch.setattr(consolidation, "_ORDER_MIN", 1)
    monkeypatch.setattr(consolidation, "_SEARCH_BLOCK", 5)
    emb = HashingEmbedder(dim=64)
    deps = {f"k{d}": [f"k{(d * 7) % 40}"] for d in range(0, 40, 3)}
    stores = [SmartVectorStore(emb, index) for _ in range(2)]
    for store, run in zip(stores, [lambda s, t: s.consolidate(t), reference_consolidate],
                          strict=True):
        reports = []
        for t, docs in knowledge_base(seed=2):
            for d, paras, st in docs:
                store.add_document(d, "\n\n".join(paras), t, source_type=st,
                                   depends_on=deps.get(d, ()))
            reports.append(dataclasses.asdict(run(store, t + 0.5 * DAY)))
        reports.append(dataclasses.asdict(run(store, t + 90 * DAY)))
        store.reports = reports
    fast, slow = stores
    assert fast.reports == slow.reports
    assert state(fast) == state(slow)
    assert sum(r["contradictions"] for r in fast.reports)


def test_bounded_search_is_read_from_the_params(monkeypatch):
    """``consolidation.search_ef`` is the ef of the consolidation's index search, and the
    index's own comes back after."""
    store = SmartVectorStore(HashingEmbedder(dim=64), "hnsw")
    for t, docs in knowledge_base(seed=1):
        for d, paras, st in docs:
            store.add_document(d, "\n\n".join(paras), t, source_type=st)
    seen = []
    search = store.index.search

    def spy(q, k):
        seen.append(store.index.ef_search)
        return search(q, k)

    monkeypatch.setattr(store.index, "search", spy)
    store.config = dataclasses.replace(store.config, consolidation=dataclasses.replace(
        store.config.consolidation, search_ef=30))
    store.consolidate(t + DAY)
    assert seen == [30] and store.index.ef_search == 64


def test_claims_still_cached_and_normalised():
    assert claims("Rotate every 90 days.") == frozenset({"90 day"})
    assert claims("Rotate every 90 days.") is claims("Rotate every 90 days.")


def test_search_ef_must_be_none_or_a_positive_int():
    from smartvector.config import ConsolidationParams

    assert ConsolidationParams(search_ef=21).search_ef == 21
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="consolidation.search_ef"):
            ConsolidationParams(search_ef=bad)


def test_claims_many_equals_claims(monkeypatch):
    """The bulk scan (numpy finds where quantities can start and their windows; the pattern
    runs once per distinct window) gives each text's claims, for any text: NUL and other
    control characters, non-ASCII ones (digits, letters that fold to ASCII), long numbers
    and units, texts that end mid-quantity, in blocks of any size."""
    rng = random.Random(7)
    alphabet = ["a", "b", "1", "2", "9", " ", ".", ",", "$", "%", "s", "S", "D", "x", "_",
                "\n", "\t", "\x00", "\x1c", "\u017f", "\u212a", "\u0663", "\u00e9", "days",
                "12.5", "$3,000", "v2", "K", "%s", " months", "1234567890123456789",
                " every 30 days", " hours"]
    texts = ["", "$", "$$5", "a$5", "x.5 days", "5.5.5 kg", "1,000 USD", "e.g.5 days", "$ 5",
             "5$5 s", "5 %", "Rotate every 90 days.", "every 30 days\x00", "\x005 days"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25)))
              for _ in range(20000)]
    for block, window in ((1 << 16, 16), (7, 8), (1000, 24)):
        monkeypatch.setattr(consolidation, "_CLAIMS_BLOCK", block)
        monkeypatch.setattr(consolidation, "_WINDOW", window)
        for some in (texts, [t for t in texts if t.isascii() and "\x00" not in t], []):
            assert claims_many(some) == [claims(t) for t in some]


def counting_log(rng: np.random.Generator, rows: int) -> CountLog:
    """A count log with a few counting events per row (and some that do not count), at
    times 0..4, some rows' events out of time order."""
    log = CountLog(rows=2, capacity=2)  # (small: it grows as one add after another would)
    kinds = ["access", "accepted", "corrected", "ripple", "contradiction", "promoted"]
    for _ in range(int(rng.integers(0, 6 * rows))):
        log.add(int(rng.integers(0, rows)), float(rng.integers(0, 5)),
                kinds[int(rng.integers(0, len(kinds)))], -float(rng.choice([0.15, 0.05])))
    return log


def log_state(log: CountLog) -> tuple:
    return log.n, log.values.tolist(), log.links.tolist(), log.head.tolist()


def test_count_log_add_many_equals_one_add_after_another():
    """Totals, jump pointers, out-of-order marks and capacities, event by event."""
    rng = np.random.default_rng(8)
    for _ in range(300):
        rows = int(rng.integers(1, 30))
        one = counting_log(rng, rows)
        bulk = copy.deepcopy(one)
        for _ in range(int(rng.integers(1, 4))):  # one row can get many events in one call
            r = rng.integers(0, rows + 3, int(rng.integers(0, 80))) % int(rng.integers(1, 40))
            deltas = -rng.choice([0.15, 0.075, 0.05], len(r))
            at = float(rng.integers(2, 7))
            kind = str(rng.choice(["ripple", "contradiction", "access", "corrected", "dormant"]))
            for x, d in zip(r.tolist(), deltas.tolist(), strict=True):
                one.add(x, at, kind, d)
            bulk.add_many(r, at, kind, deltas)
            assert log_state(bulk) == log_state(one)


def test_count_log_add_many_grows_for_rows_beyond_its_head_as_add_does():
    """Rows beyond the log's row capacity (1,024 at first) mid-call, and a full event log:
    the arrays grow where one add after another grows them, and the entries match."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        one = CountLog(rows=2, capacity=2)
        for r in rng.integers(0, 50, 20).tolist():
            one.add(r, 1.0, "access", 0.0)
        bulk = copy.deepcopy(one)
        r = rng.integers(0, 50, int(rng.integers(1, 30)))
        big = rng.random(len(r)) < 0.2
        big[len(r) // 2] = True  # (at least one, mid-call)
        r[big] = rng.integers(1024, 5000)  # beyond the head, the same row each time
        deltas = -rng.choice([0.15, 0.05], len(r))
        for x, d in zip(r.tolist(), deltas.tolist(), strict=True):
            one.add(x, 2.0, "ripple", d)
        bulk.add_many(r, 2.0, "ripple", deltas)
        assert log_state(bulk) == log_state(one)
        assert len(bulk.head) > 1024


def random_store(rng: np.random.Generator, n: int = 40) -> SmartVectorStore:
    """A store of ``n`` vectors with feedback, accesses (one in the future of the penalties
    below, which marks its row's count log out of order) and dependency edges."""
    store = SmartVectorStore(HashingEmbedder(dim=16), "exact")
    store.add_vectors(rng.standard_normal((n, 16)), [f"text {i}" for i in range(n)],
                      [f"d{i}" for i in range(n)], T0)
    for r in rng.integers(0, n, 30).tolist():
        store.feedback(store.ids[r], bool(r % 2), T0 + float(rng.integers(0, 3)) * DAY)
    store.record_access(rng.integers(0, n, 10), T0 + 2 * DAY)
    store.record_access([3], T0 + 9 * DAY)
    for x, y in rng.integers(0, n, (60, 2)).tolist():
        store.graph.link_dependency(x, y, T0 + float(rng.integers(0, 6)) * DAY)
    return store


def store_state(store: SmartVectorStore) -> tuple:
    """Columns, events (repr: values and their types, in order) and the count log."""
    cols = {k: v.tolist() for k, v in store.columns.to_arrays().items()}
    return repr(cols), repr(store.events), log_state(store.counts)


def test_penalise_many_and_propagate_many_equal_one_call_after_another():
    rng = np.random.default_rng(9)
    for _ in range(20):
        one = random_store(rng)
        bulk = copy.deepcopy(one)
        rows = rng.integers(0, len(one), 50)
        rows[10:14] = rows[9]  # one row penalised several times in a row (a shared event)
        amounts = rng.choice([0.15, 0.05], len(rows))
        details = [f"lost to {r % 3}" for r in rows.tolist()]
        t = T0 + 5 * DAY
        for r, a, d in zip(rows.tolist(), amounts.tolist(), details, strict=True):
            one.penalise(r, a, t, "contradiction", d)
        bulk.penalise_many(rows, amounts, t, "contradiction", details)
        assert store_state(bulk) == store_state(one)
        sources = rng.integers(0, len(one), 12).tolist()
        want = sum(one.propagate(r, t + DAY) for r in sources)
        assert bulk.propagate_many(sources, t + DAY) == want > 0
        assert store_state(bulk) == store_state(one)
        bulk.penalise_many(np.array([], np.int64), 0.1, t, "ripple", [])  # nothing
        assert store_state(bulk) == store_state(one)
    with pytest.raises(ValueError, match="2 rows but 1 details"):
        bulk.penalise_many(np.array([0, 1]), 0.1, t, "ripple", ["x"])


def contradicting_store(index: str, seed: int) -> tuple[SmartVectorStore, list[float]]:
    """A store that will find many contradictions: documents on a few topics, near-duplicate
    chunks across documents stating other quantities (none, one, several; ASCII or not),
    sources of several authorities, feedback, edits and dependencies, ingested over four
    batches; returns it and the times to consolidate at (after each batch, and later)."""
    rng = np.random.default_rng(seed)
    dim = 32
    topics = rng.standard_normal((8, dim))
    store = SmartVectorStore(HashingEmbedder(dim=dim), index)
    times = []
    statements = ["rotate it every {q} days", "rotate it every {q} days or {r} hours",
                  "rotate it every {q} days and {q} hours", "keep the records up to date",
                  "la r\u00e9vision se fait tous les {q} jours", "it costs ${q},000 per {r} days"]
    for batch in range(4):
        t = T0 + 30 * batch * DAY
        texts, docs, sources, emb = [], [], [], []
        for d in rng.choice(60, 24, replace=False).tolist():
            for j in range(1 + d % 3):
                topic = (d + j) % len(topics)
                q, r = (int(x) for x in rng.choice([15, 30, 45, 60, 90], 2))
                what = statements[int(rng.integers(0, len(statements)))].format(q=q, r=r)
                texts.append(f"Topic {'ABCDEFGH'[topic]}, rule {'xyz'[j]}: {what}.")
                emb.append(topics[topic] + 0.15 * rng.standard_normal(dim))
                docs.append(f"k{d}")
                sources.append(["policy_doc", "chat", "wiki", "email"][d % 4])
        store.add_vectors(np.array(emb), texts, docs, t, source_type=sources,
                          depends_on={f"k{d}": [f"k{d - 8}"] for d in range(8, 60, 3)})
        for r in rng.integers(0, len(store), 10).tolist():
            store.feedback(store.ids[r], bool(r % 3), t)
        times.append(t + DAY)
    # some pairs linked already (as a loaded graph may hold): not found again
    for a, b in rng.integers(0, len(store), (300, 2)).tolist():
        if store.doc_of[a] != store.doc_of[b]:
            store.graph.link_contradicts(a, b, T0)
    return store, [*times, times[-1] + 60 * DAY]


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_many_contradictions_equal_the_plain_loops(index, monkeypatch):
    """Passes with hundreds of contradictions (and pairs linked in earlier passes, losers that
    lose again, ripples from them) leave the store as the plain per-pair loops do: reports
    (details in order), events, edges, columns and the count log. The search runs in
    locality order (few pivots: not the row order) and small blocks whatever the size."""
    monkeypatch.setattr(consolidation, "_ORDER_MIN", 1)
    monkeypatch.setattr(consolidation, "_SEARCH_BLOCK", 7)
    monkeypatch.setattr(consolidation, "_PIVOTS", 3)
    monkeypatch.setattr(consolidation, "_CLAIMS_FIRST", 1)  # (HNSW: claimless rows unsearched)
    seen = []
    search = consolidation._search_in_order
    monkeypatch.setattr(consolidation, "_search_in_order",
                        lambda *a: seen.append(search(*a)) or seen[-1])
    fast, times = contradicting_store(index, seed=3)
    slow = copy.deepcopy(fast)
    for store, run in ((fast, lambda s, t: s.consolidate(t)), (slow, reference_consolidate)):
        store.reports = []
        for i, t in enumerate(times):
            if i:  # pairs found before are not found again; new ones are
                store.config = dataclasses.replace(store.config, consolidation=dataclasses.replace(
                    store.config.consolidation, contradiction_similarity=0.5 - 0.1 * i))
            store.reports.append(dataclasses.asdict(run(store, t)))
    assert fast.reports == slow.reports
    assert state(fast) == state(slow)
    assert store_state(fast) == store_state(slow)
    found = [r["contradictions"] for r in fast.reports]
    assert sum(found) > 300 and sum(bool(x) for x in found) >= 3, found
    assert sum(r["ripples"] for r in fast.reports) > 20
    if index == "hnsw":  # (the exact index is searched in one batch, in row order)
        assert all((order != np.arange(len(order))).any()
                   for *_, order in seen if len(order) > 9)


def test_hnsw_pass_searches_only_new_vectors_stating_quantities(monkeypatch):
    """From ``_CLAIMS_FIRST`` new vectors up, an HNSW pass searches only the new live rows
    whose texts state quantities (the others cannot contradict anything), and leaves the store
    exactly as the pass that searches them all: reports, events, edges, columns, count log."""
    searched = []
    search = consolidation._search_in_order

    def spy(index, vectors, rows, k, ef):
        searched.append(len(rows))
        return search(index, vectors, rows, k, ef)

    monkeypatch.setattr(consolidation, "_search_in_order", spy)
    first, times = contradicting_store("hnsw", seed=5)
    every = copy.deepcopy(first)
    for store, claims_first in ((first, 1), (every, 10**9)):
        monkeypatch.setattr(consolidation, "_CLAIMS_FIRST", claims_first)
        searched.clear()
        store.reports, store.searched = [], []
        for t in times:
            c = store.columns
            new = np.flatnonzero((c["created_at"] <= t) & np.isinf(c["consolidated_at"])
                                 & ~(c["superseded_at"] <= t))
            stating = sum(bool(claims(store.texts[r])) for r in new.tolist())
            store.reports.append(dataclasses.asdict(store.consolidate(t)))
            store.searched.append((len(new), stating))
        store.calls = list(searched)
    assert first.reports == every.reports
    assert state(first) == state(every) and store_state(first) == store_state(every)
    assert sum(r["contradictions"] for r in first.reports) > 50
    # the passes with new vectors searched those stating quantities, or all of them
    made = [(n, q) for n, q in first.searched if n]
    assert first.calls == [q for _, q in made] and every.calls == [n for n, _ in made]
    assert all(q < n for n, q in made), made


def test_hnsw_pass_whose_new_vectors_state_no_quantity_searches_nothing(monkeypatch):
    monkeypatch.setattr(consolidation, "_CLAIMS_FIRST", 1)
    rng = np.random.default_rng(0)
    store = SmartVectorStore(HashingEmbedder(dim=16), "hnsw")
    topic = rng.standard_normal(16)
    store.add_vectors(topic + 0.01 * rng.standard_normal((30, 16)),
                      [f"Rule {'abcdefghij'[i % 10]}: keep the records up to date."
                       for i in range(30)], [f"d{i}" for i in range(30)], T0)

    def never(*a):
        raise AssertionError("searched")

    monkeypatch.setattr(store.index, "search", never)
    report = store.consolidate(T0 + DAY)
    assert (report.contradictions, report.promoted) == (0, 30)
