"""A disk cache around any embedder: vectors kept in SQLite by model name and text hash,
safe for several processes."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .base import Embedder

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
