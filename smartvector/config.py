"""Parameters of the SmartVector store, with the reference proof-of-concept's defaults.

Plain dataclasses (no Hydra): the harness builds them from its own configs. Each validates
itself on construction and raises ``ValueError`` naming the bad field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


def _check(cond: bool, name: str, value: object, rule: str) -> None:
    if not cond:
        raise ValueError(f"{name} must be {rule}, got {value!r}")


def _finite(x: float) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


ANCHORS = ("created", "validity")


@dataclass(frozen=True)
class ConfidenceParams:
    """Confidence engine: ``C0 * 2^(-age/H)`` plus feedback, access and ripple terms."""

    half_life_days: float = 30.0
    positive_boost: float = 0.03
    negative_penalty: float = 0.08
    access_reinforcement: float = 0.01
    access_cap: float = 0.10
    floor: float = 0.01
    dormant_threshold: float = 0.15
    anchor: str = "created"  # or "validity": no decay while in force, then from its end

    def __post_init__(self) -> None:
        _check(self.anchor in ANCHORS, "confidence.anchor", self.anchor,
               f"one of {', '.join(ANCHORS)}")
        _check(_finite(self.half_life_days) and self.half_life_days > 0,
               "confidence.half_life_days", self.half_life_days, "> 0")
        for name in ("positive_boost", "negative_penalty", "access_reinforcement",
                     "access_cap"):
            v = getattr(self, name)
            _check(_finite(v) and v >= 0, f"confidence.{name}", v, ">= 0")
        _check(_finite(self.floor) and 0 <= self.floor < 1, "confidence.floor",
               self.floor, "in [0, 1)")
        _check(_finite(self.dormant_threshold) and 0 <= self.dormant_threshold <= 1,
               "confidence.dormant_threshold", self.dormant_threshold, "in [0, 1]")


@dataclass(frozen=True)
class ScoringWeights:
    """Weights of the four signals; validated and normalised to sum to 1."""

    semantic: float = 0.35
    temporal: float = 0.25
    confidence: float = 0.25
    relational: float = 0.15

    def __post_init__(self) -> None:
        for name in ("semantic", "temporal", "confidence", "relational"):
            v = getattr(self, name)
            _check(_finite(v) and v >= 0, f"weights.{name}", v, "a finite number >= 0")
        _check(self.total > 0, "weights", self.as_tuple(), "not all zero")

    @property
    def total(self) -> float:
        return self.semantic + self.temporal + self.confidence + self.relational

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.semantic, self.temporal, self.confidence, self.relational)

    def normalised(self) -> tuple[float, float, float, float]:
        """Weights divided by their sum (a convex combination); scaled by the largest
        first so that huge weights do not overflow."""
        top = max(self.as_tuple())
        scaled = [w / top for w in self.as_tuple()]
        t = sum(scaled)
        s, te, c, r = (w / t for w in scaled)
        return (s, te, c, r)


@dataclass(frozen=True)
class TemporalParams:
    """Temporal signal. ``anchor="created"`` (the paper): ``2^(-age/H_t)`` with age since
    creation inside the validity window, ``outside_window`` beyond it. ``anchor="validity"``:
    1 while the vector is in force at the query's time, ``2^(-(t - end)/H_t)`` after it
    stopped being in force (its window closed, it was superseded or it lost a contradiction),
    ``outside_window`` before its window opens."""

    half_life_days: float = 30.0
    outside_window: float = 0.05
    anchor: str = "created"

    def __post_init__(self) -> None:
        _check(_finite(self.half_life_days) and self.half_life_days > 0,
               "temporal.half_life_days", self.half_life_days, "> 0")
        _check(_finite(self.outside_window) and 0 <= self.outside_window <= 1,
               "temporal.outside_window", self.outside_window, "in [0, 1]")
        _check(self.anchor in ANCHORS, "temporal.anchor", self.anchor,
               f"one of {', '.join(ANCHORS)}")


@dataclass(frozen=True)
class RelationalParams:
    """Relational signal: ``min(cap, scale * ln(1 + edges))``."""

    scale: float = 0.1
    cap: float = 0.3

    def __post_init__(self) -> None:
        _check(_finite(self.scale) and self.scale >= 0, "relational.scale", self.scale, ">= 0")
        _check(_finite(self.cap) and self.cap >= 0, "relational.cap", self.cap, ">= 0")


@dataclass(frozen=True)
class RippleParams:
    """Ripple: penalty ``p / (depth + 1)`` for depth 0 .. max_depth-1 along depended_by."""

    penalty: float = 0.15
    max_depth: int = 2

    def __post_init__(self) -> None:
        _check(_finite(self.penalty) and 0 <= self.penalty <= 1, "ripple.penalty",
               self.penalty, "in [0, 1]")
        _check(isinstance(self.max_depth, int) and self.max_depth >= 0, "ripple.max_depth",
               self.max_depth, "an int >= 0")


#: how a contradiction is resolved: the paper's majority of recency, authority and feedback,
#: or the source with clearly higher authority (by ``authority_margin``), else the newer one
RESOLUTIONS = ("majority", "authority_margin")


@dataclass(frozen=True)
class ConsolidationParams:
    """Consolidation ("sleep"): contradiction search, dependency edges, archival."""

    neighbours: int = 10
    contradiction_similarity: float = 0.70
    contradiction_penalty: float = 0.15
    dependency_similarity: float = 0.50
    archive_after_days: float = 30.0
    resolution: str = "majority"
    authority_margin: float = 0.3
    #: hnswlib ef of the neighbour search (None: the index's ef_search); lower is faster and
    #: may miss neighbours, hence contradictions (benchmarks/bench_consolidation.py)
    search_ef: int | None = None

    def __post_init__(self) -> None:
        _check(self.search_ef is None or (isinstance(self.search_ef, int)
                                          and not isinstance(self.search_ef, bool)
                                          and self.search_ef >= 1),
               "consolidation.search_ef", self.search_ef, "None or an int >= 1")
        _check(isinstance(self.neighbours, int) and self.neighbours >= 1,
               "consolidation.neighbours", self.neighbours, "an int >= 1")
        for name in ("contradiction_similarity", "dependency_similarity"):
            v = getattr(self, name)
            _check(_finite(v) and -1 <= v <= 1, f"consolidation.{name}", v, "in [-1, 1]")
        _check(_finite(self.contradiction_penalty) and 0 <= self.contradiction_penalty <= 1,
               "consolidation.contradiction_penalty", self.contradiction_penalty, "in [0, 1]")
        _check(_finite(self.archive_after_days) and self.archive_after_days >= 0,
               "consolidation.archive_after_days", self.archive_after_days, ">= 0")
        _check(self.resolution in RESOLUTIONS, "consolidation.resolution", self.resolution,
               f"one of {', '.join(RESOLUTIONS)}")
        _check(_finite(self.authority_margin) and 0 <= self.authority_margin <= 1,
               "consolidation.authority_margin", self.authority_margin, "in [0, 1]")


@dataclass(frozen=True)
class StoreConfig:
    """Everything the store needs besides its embedder and index."""

    confidence: ConfidenceParams = field(default_factory=ConfidenceParams)
    weights: ScoringWeights = field(default_factory=ScoringWeights)
    temporal: TemporalParams = field(default_factory=TemporalParams)
    relational: RelationalParams = field(default_factory=RelationalParams)
    ripple: RippleParams = field(default_factory=RippleParams)
    consolidation: ConsolidationParams = field(default_factory=ConsolidationParams)
    max_chunk_chars: int = 1000
    pool: int = 50  # nearest visible candidates re-ranked by a search, whatever k
    record_access: bool = True

    def __post_init__(self) -> None:
        _check(isinstance(self.max_chunk_chars, int) and self.max_chunk_chars >= 1,
               "max_chunk_chars", self.max_chunk_chars, "an int >= 1")
        _check(isinstance(self.pool, int) and not isinstance(self.pool, bool)
               and self.pool >= 1, "pool", self.pool, "an int >= 1")
