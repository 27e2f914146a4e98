"""Public records: lifecycle status, a vector's snapshot, retrieval hits, events, reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np


class Status(IntEnum):
    """Lifecycle: UNCONSOLIDATED -> ACTIVE -> DORMANT; superseded: DEPRECATED -> ARCHIVED."""

    UNCONSOLIDATED = 0
    ACTIVE = 1
    DORMANT = 2
    DEPRECATED = 3
    ARCHIVED = 4


#: Statuses that retrieval with lifecycle filtering returns.


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened to a vector: why its confidence or status changed."""

    at: float
    kind: str
    delta: float = 0.0
    detail: str = ""


@dataclass(frozen=True)
class Source:
    type: str
    name: str
    author: str
    authority: float


@dataclass(frozen=True)
class Edges:
    depends_on: tuple[str, ...] = ()
    depended_by: tuple[str, ...] = ()
    supersedes: tuple[str, ...] = ()
    superseded_by: tuple[str, ...] = ()
    contradicts: tuple[str, ...] = ()


@dataclass(frozen=True)
class SmartVector:
    """A snapshot of one stored vector as seen at a reference time."""

    vector_id: str
    doc_id: str
    doc_version: int
    chunk_index: int
    start: int
    end: int
    content: str
    content_hash: str
    embedding: np.ndarray
    source: Source
    created_at: float
    updated_at: float
    valid_from: float
    valid_to: float
    base_confidence: float
    confidence: float
    access_count: int
    positive_feedback: int
    negative_feedback: int
    last_accessed: float | None
    last_validated: float | None
    half_life_days: float
    edges: Edges
    status: Status
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Hit:
    """One retrieved vector with the four signals that ranked it."""

    vector_id: str
    doc_id: str
    content: str
    score: float
    semantic: float
    temporal: float
    confidence: float
    relational: float
    status: Status


@dataclass
class UpdateReport:
    """What ingesting one document version did."""

    doc_id: str
    version: int
    n_chunks: int
    n_reembedded: int
    added: list[str] = field(default_factory=list)
    deprecated: list[str] = field(default_factory=list)
    kept: int = 0


@dataclass
class ConsolidationReport:
    """What one consolidation pass did."""

    at: float
    checked: int = 0
    dormant: int = 0
    contradictions: int = 0
    dependency_edges: int = 0
    ripples: int = 0
    archived: int = 0
    promoted: int = 0
    details: list[str] = field(default_factory=list)
