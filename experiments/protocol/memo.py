"""An in-process memo over an embedder, so methods replaying one corpus share embeddings."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from smartvector.embedders import Embedder


class MemoEmbedder:
    """Remembers every text it embedded; misses go to the inner embedder in one batch."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._memo: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            for t, v in zip(missing, self.inner.encode(missing), strict=True):
                self._memo[t] = np.asarray(v, dtype=np.float32)
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        return np.stack([self._memo[t] for t in texts])
