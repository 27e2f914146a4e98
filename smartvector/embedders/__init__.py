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

import os
from typing import Any

from .base import Embedder, ModelUnavailableError
from .cache import CachedEmbedder
from .hashing import HashingEmbedder
from .model import (
    BACKENDS,
    DEFAULT_BACKEND,
    MiniLMEmbedder,
    SentenceTransformerEmbedder,
    check_available,
)

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "CachedEmbedder", "Embedder", "HashingEmbedder",
           "MiniLMEmbedder", "ModelUnavailableError", "SentenceTransformerEmbedder",
           "check_available", "make_embedder"]


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
