"""SmartVector: self-aware vector embeddings (temporal, confidence, relational) for RAG.

The public API: :class:`SmartVectorStore` with its :class:`StoreConfig`, the embedders and
indexes it runs on, and the records it returns.
"""

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
from .index import ExactIndex, HnswIndex, make_index
from .store import SmartVectorStore
from .vector import ConsolidationReport, Event, Hit, SmartVector, Status, UpdateReport

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
