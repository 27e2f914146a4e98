"""The consolidation pass's fast paths give the plain code's results: the quantity regex, the
vectorised resolution, the search in locality order and blocks, and the bounded search."""

from __future__ import annotations

import dataclasses
import random
import re

import numpy as np
import pytest
from test_bulk import knowledge_base, reference_consolidate, state

from smartvector import HashingEmbedder, SmartVectorStore, consolidation
from smartvector.consolidation import _locality_order, _resolve_many, _search, claims, resolve
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
