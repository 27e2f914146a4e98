from __future__ import annotations

import numpy as np
import pytest

from smartvector.index import ExactIndex, HnswIndex, VectorIndex, make_index

KINDS = ["exact", "hnsw"]


def _clustered(n: int, dim: int, clusters: int, seed: int) -> np.ndarray:
    """Gaussian clusters wide enough that nearest neighbours are not trivial to find."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim))
    x = centres[rng.integers(0, clusters, size=n)] + rng.normal(size=(n, dim))
    return x.astype(np.float32)


def _naive_top_k(data: np.ndarray, labels: np.ndarray, q: np.ndarray, k: int):
    d = data / np.linalg.norm(data, axis=1, keepdims=True)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    sims = qn.astype(np.float64) @ d.T.astype(np.float64)
    out_l, out_s = [], []
    for row in sims:
        order = sorted(range(len(row)), key=lambda j: (-row[j], labels[j]))[:k]
        out_l.append(labels[order])
        out_s.append(row[order])
    return np.array(out_l), np.array(out_s)


def _recall(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.mean([len(set(g) & set(w)) / len(w) for g, w in zip(got, want, strict=True)]))


@pytest.fixture(scope="module")
def clustered() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data = _clustered(5000, 64, 50, seed=1)
    rng = np.random.default_rng(2)
    queries = data[rng.choice(len(data), 200, replace=False)] + 0.2 * rng.normal(
        size=(200, 64)
    ).astype(np.float32)
    labels = np.arange(10_000, 10_000 + len(data), dtype=np.int64)
    return data, labels, queries


def test_make_index_kinds() -> None:
    assert isinstance(make_index("exact", 8), ExactIndex)
    assert isinstance(make_index("hnsw", 8, M=8), HnswIndex)
    assert isinstance(make_index("exact", 8), VectorIndex)
    msg = r"unknown index kind 'faiss' \(choose from: exact, hnsw\)"
    with pytest.raises(ValueError, match=msg):
        make_index("faiss", 8)


def test_exact_matches_naive() -> None:
    rng = np.random.default_rng(0)
    data = rng.normal(size=(300, 16)).astype(np.float32)
    labels = rng.permutation(1000)[:300].astype(np.int64)
    queries = rng.normal(size=(7, 16)).astype(np.float32)
    idx = ExactIndex(16)
    idx.add(labels[:100], data[:100])
    idx.add(labels[100:], data[100:])
    got_l, got_s = idx.search(queries, 10)
    want_l, want_s = _naive_top_k(data, labels, queries, 10)
    assert got_l.dtype == np.int64 and got_s.dtype == np.float32
    assert got_l.shape == got_s.shape == (7, 10)
    np.testing.assert_array_equal(got_l, want_l)
    np.testing.assert_allclose(got_s, want_s, atol=1e-6)


def test_exact_ties_broken_by_label() -> None:
    idx = ExactIndex(2)
    # five identical vectors with scrambled labels, plus one orthogonal
    idx.add(np.array([9, 3, 7, 1, 5, 4]), np.array([[1, 0]] * 5 + [[0, 1]], dtype=np.float32))
    labels, sims = idx.search(np.array([1.0, 0.0]), 3)
    np.testing.assert_array_equal(labels, [[1, 3, 5]])
    np.testing.assert_allclose(sims, [[1, 1, 1]])


def test_exact_top_k_is_the_sort_by_similarity_then_label_with_many_ties() -> None:
    """The compiled selection keeps exactly the first k of the whole row sorted by
    (-similarity, label), for every k (past n too), on rows full of ties, scrambled labels,
    one query or many."""
    from smartvector.kernels import top_k

    rng = np.random.default_rng(5)
    for n in (1, 2, 7, 64, 300):
        labels = rng.permutation(10 * n)[:n].astype(np.int64)
        sims = (rng.integers(-3, 4, size=(5, n)) / 4).astype(np.float32)  # 7 values: ties
        sims[1] = rng.normal(size=n).astype(np.float32)  # and a row without
        for k in sorted({1, 2, 5, n - 1, n, n + 3} - {0}):
            got_l, got_s = top_k(sims, labels, k)
            for row, gl, gs in zip(sims, got_l, got_s, strict=True):
                order = np.lexsort((labels, -row))[:k]
                np.testing.assert_array_equal(gl, labels[order])
                np.testing.assert_array_equal(gs, row[order])
            assert got_l.shape == (5, min(k, n)) and got_s.dtype == np.float32


@pytest.mark.parametrize("kind", KINDS)
def test_one_d_query_and_self_match(kind: str) -> None:
    rng = np.random.default_rng(3)
    data = rng.normal(size=(50, 8)).astype(np.float32)
    idx = make_index(kind, 8)
    idx.add(np.arange(50), data)
    labels, sims = idx.search(data[17], 3)
    assert labels.shape == sims.shape == (1, 3)
    assert labels[0, 0] == 17
    assert sims[0, 0] == pytest.approx(1.0, abs=1e-5)
    assert np.all(np.diff(sims[0]) <= 0)


@pytest.mark.parametrize("kind", KINDS)
def test_k_larger_than_index_and_empty(kind: str) -> None:
    idx = make_index(kind, 4)
    labels, sims = idx.search(np.ones((3, 4)), 5)
    assert labels.shape == sims.shape == (3, 0)
    assert labels.dtype == np.int64 and sims.dtype == np.float32
    idx.add(np.array([2, 0, 1]), np.eye(4, dtype=np.float32)[:3])
    labels, sims = idx.search(np.ones((2, 4)), 10)
    assert labels.shape == sims.shape == (2, 3)
    np.testing.assert_array_equal(labels, [[0, 1, 2], [0, 1, 2]])  # equal sims: by label
    np.testing.assert_allclose(sims, 0.5, atol=1e-6)
    assert idx.search(np.ones(4), 0)[0].shape == (1, 0)
    assert len(idx) == 3


@pytest.mark.parametrize("kind", KINDS)
def test_rejects_bad_vectors(kind: str) -> None:
    idx = make_index(kind, 3)
    vecs = np.array([[1, 0, 0], [0, 0, 0]], dtype=np.float32)
    with pytest.raises(ValueError, match="label 42 has zero norm"):
        idx.add(np.array([41, 42]), vecs)
    with pytest.raises(ValueError, match="label 7 has non-finite"):
        idx.add(np.array([7]), np.array([[np.nan, 1, 0]]))
    assert len(idx) == 0  # a rejected batch adds nothing
    with pytest.raises(ValueError, match="negative"):
        idx.add(np.array([-1]), np.ones((1, 3)))
    with pytest.raises(ValueError, match="appears twice"):
        idx.add(np.array([1, 1]), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"shape \(n, 3\)"):
        idx.add(np.array([1]), np.ones((1, 4)))
    idx.add(np.array([1]), np.ones((1, 3)))
    with pytest.raises(ValueError, match="query 1 has zero norm"):
        idx.search(np.array([[1, 0, 0], [0, 0, 0]]), 1)


def test_unit_rows_in_blocks_match_row_by_row() -> None:
    """Many rows are normalised a block at a time: every row comes out as it would alone
    (float64 norm, float32 result), bit for bit, and a bad row past the first block is named."""
    from smartvector.index import _ROW_BLOCK, _unit_rows

    rng = np.random.default_rng(5)
    n = 2 * _ROW_BLOCK + 7
    x = (rng.normal(size=(n, 24)) * rng.uniform(0.01, 100, size=(n, 1))).astype(np.float32)
    alone = np.stack([(r / np.linalg.norm(r.astype(np.float64))).astype(np.float32) for r in x])
    out = _unit_rows(x, 24, None)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out.view(np.uint32), alone.view(np.uint32))
    x[_ROW_BLOCK + 3] = 0
    with pytest.raises(ValueError, match=f"query {_ROW_BLOCK + 3} has zero norm"):
        _unit_rows(x, 24, None)


def test_many_vectors_read_from_one_copy_of_the_index_equal_get_items(monkeypatch) -> None:
    """From 1,024 labels, ``get_vectors`` reads one copy of hnswlib's memory instead of
    calling ``get_items``: the same float32 values, bit for bit, for labels in any order,
    after replacements and a build on two threads; an unknown label is still named."""
    rng = np.random.default_rng(8)
    n = 2100
    idx = make_index("hnsw", 12, num_threads=2)
    x = rng.normal(size=(n, 12)).astype(np.float32)
    for part in np.array_split(rng.permutation(n), 3):  # labels added out of order
        idx.add(part, x[part])
    idx.add(np.arange(10), rng.normal(size=(10, 12)))  # replaced
    labels = rng.permutation(n)[:1030]
    one_by_one = np.asarray(idx._index.get_items(labels.astype(np.uint64),
                                                 return_type="numpy"), dtype=np.float32)
    calls = []
    bulk = HnswIndex._bulk_vectors
    monkeypatch.setattr(HnswIndex, "_bulk_vectors",
                        lambda self, labels: calls.append(bulk(self, labels)) or calls[-1])
    got = idx.get_vectors(labels)
    assert len(calls) == 1 and calls[0] is not None  # (the bulk path was taken)
    assert got.flags.c_contiguous and got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), one_by_one.view(np.uint32))
    with pytest.raises(KeyError, match=f"label {n + 3} is not in the index"):
        idx.get_vectors(np.append(labels, n + 3))


@pytest.mark.parametrize("kind", KINDS)
def test_get_vectors_and_replace(kind: str) -> None:
    idx = make_index(kind, 3)
    idx.add(np.array([5, 6]), np.array([[3, 0, 4], [0, 2, 0]], dtype=np.float32))
    np.testing.assert_allclose(idx.get_vectors(np.array([6, 5])), [[0, 1, 0], [0.6, 0, 0.8]])
    idx.add(np.array([5]), np.array([[0, 0, 2.0]]))  # same label: replaced
    assert len(idx) == 2
    np.testing.assert_allclose(idx.get_vectors(np.array([5])), [[0, 0, 1]])
    labels, _ = idx.search(np.array([0, 0, 1.0]), 1)
    assert labels[0, 0] == 5
    with pytest.raises(KeyError, match="label 8"):
        idx.get_vectors(np.array([8]))


@pytest.mark.parametrize("kind", KINDS)
def test_growth_beyond_initial_capacity(kind: str) -> None:
    kw = {"initial_capacity": 16} if kind == "hnsw" else {}
    idx = make_index(kind, 8, **kw)
    rng = np.random.default_rng(4)
    data = rng.normal(size=(300, 8)).astype(np.float32)
    for start in range(0, 300, 7):  # many small adds, crossing several capacity doublings
        idx.add(np.arange(start, min(start + 7, 300)), data[start : start + 7])
    assert len(idx) == 300
    if kind == "hnsw":
        assert idx.capacity == 512
    labels, _ = idx.search(data, 1)
    np.testing.assert_array_equal(labels[:, 0], np.arange(300))
    np.testing.assert_allclose(
        idx.get_vectors(np.arange(300)),
        data / np.linalg.norm(data, axis=1, keepdims=True),
        atol=1e-6,
    )


def test_hnsw_recall_vs_exact(clustered) -> None:
    data, labels, queries = clustered
    exact, hnsw = ExactIndex(64), HnswIndex(64)
    exact.add(labels, data)
    hnsw.add(labels, data)
    want, _ = exact.search(queries, 10)
    got, sims = hnsw.search(queries, 10)
    assert _recall(got, want) >= 0.95
    # the check has teeth: a starved graph misses neighbours
    weak = HnswIndex(64, M=4, ef_construction=20, ef_search=10)
    weak.add(labels, data)
    assert _recall(weak.search(queries, 10)[0], want) < 0.9
    # similarities are real cosines of the returned labels
    vecs = exact.get_vectors(got[0])
    qn = queries[0] / np.linalg.norm(queries[0])
    np.testing.assert_allclose(sims[0], vecs @ qn, atol=1e-5)
    # k above ef_search still returns k results
    got, _ = hnsw.search(queries[:5], 150)
    assert got.shape == (5, 150)


def test_hnsw_falls_back_to_brute_force(clustered, monkeypatch) -> None:
    data, labels, queries = clustered
    exact, hnsw = ExactIndex(64), HnswIndex(64, M=8, ef_construction=50)
    exact.add(labels[:500], data[:500])
    hnsw.add(labels[:500], data[:500])

    class Failing:
        def __init__(self, inner) -> None:
            self.inner = inner

        def __getattr__(self, name: str):
            return getattr(self.inner, name)

        def knn_query(self, *a, **kw):
            raise RuntimeError("Cannot return the results in a contiguous 2D array.")

    monkeypatch.setattr(hnsw, "_index", Failing(hnsw._index))
    got_l, got_s = hnsw.search(queries[:20], 7)
    want_l, want_s = exact.search(queries[:20], 7)
    np.testing.assert_array_equal(got_l, want_l)
    np.testing.assert_allclose(got_s, want_s, atol=1e-6)


def test_hnsw_deterministic_single_thread(clustered) -> None:
    data, labels, queries = clustered
    results = []
    for _ in range(2):
        idx = HnswIndex(64, M=8, ef_construction=50, seed=3)
        idx.add(labels[:1500], data[:1500])
        results.append(idx.search(queries, 10))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


@pytest.mark.parametrize("kind", KINDS)
def test_save_load_round_trip(kind: str, tmp_path, clustered) -> None:
    data, labels, queries = clustered
    kw = {"ef_search": 40, "M": 8} if kind == "hnsw" else {}
    idx = make_index(kind, 64, **kw)
    idx.add(labels[:2000], data[:2000])
    path = tmp_path / "sub" / "index.bin"
    idx.save(path)
    loaded = type(idx).load(path)
    assert len(loaded) == len(idx) and loaded.dim == 64
    for a, b in zip(idx.search(queries, 10), loaded.search(queries, 10), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(
        idx.get_vectors(labels[:20]), loaded.get_vectors(labels[:20])
    )
    # the loaded index keeps growing
    loaded.add(labels[2000:2100], data[2000:2100])
    assert len(loaded) == 2100
    assert loaded.search(data[2050], 1)[0][0, 0] == labels[2050]
    files = sorted(p.name for p in path.parent.iterdir())  # no temporary files left behind
    assert files == (["index.bin", "index.bin.json"] if kind == "hnsw" else ["index.bin"])
    if kind == "hnsw":
        assert loaded.ef_search == 40 and loaded.M == 8


def test_hnsw_load_detects_mismatched_sidecar(tmp_path) -> None:
    rng = np.random.default_rng(5)
    idx = HnswIndex(4)
    idx.add(np.arange(10), rng.normal(size=(10, 4)))
    idx.save(tmp_path / "a")
    idx.add(np.arange(10, 20), rng.normal(size=(10, 4)))
    idx.save(tmp_path / "b")
    (tmp_path / "b.json").replace(tmp_path / "a.json")
    with pytest.raises(ValueError, match="does not match"):
        HnswIndex.load(tmp_path / "a")
