"""SmartVector: self-aware vector embeddings (temporal, confidence, relational) for RAG.

The public API: :class:`SmartVectorStore` with its :class:`StoreConfig`, the embedders and
indexes it runs on, and the records it returns. The store and the indexes (numba, hnswlib)
are imported when first used, so that importing a light module of the package (its
configuration, :mod:`smartvector.fileio`...) does not load them.
"""

from typing import TYPE_CHECKING, Any

from .config import (
    ConfidenceParams,
    ConsolidationParams,
    RelationalParams,
    RippleParams,
    ScoringWeights,
    StoreConfig,
    TemporalParams,
)
from .embedders import (
    CachedEmbedder,
    HashingEmbedder,
    MiniLMEmbedder,
    ModelUnavailableError,
    make_embedder,
)
from .vector import ConsolidationReport, Event, Hit, SmartVector, Status, UpdateReport

if TYPE_CHECKING:
    from .index import ExactIndex, HnswIndex, make_index
    from .store import SmartVectorStore

_LAZY = {"SmartVectorStore": "store", "ExactIndex": "index", "HnswIndex": "index",
         "make_index": "index"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CachedEmbedder",
    "ConfidenceParams",
    "ConsolidationParams",
    "ConsolidationReport",
    "Event",
    "ExactIndex",
    "HashingEmbedder",
    "Hit",
    "HnswIndex",
    "MiniLMEmbedder",
    "ModelUnavailableError",
    "RelationalParams",
    "RippleParams",
    "ScoringWeights",
    "SmartVector",
    "SmartVectorStore",
    "Status",
    "StoreConfig",
    "TemporalParams",
    "UpdateReport",
    "make_embedder",
    "make_index",
]
