"""A fast deterministic embedder for tests and smoke runs: hashed word tokens, no model."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from itertools import chain

import numpy as np

from .base import _normalise_rows

_TOKEN = re.compile(r"\w+")


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
