"""The four retrieval signals and their weighted sum, vectorised over candidates."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .config import RelationalParams, ScoringWeights, TemporalParams
from .timeutil import DAY


def temporal_signal(
    at: float,
    created_at: ArrayLike,
    valid_from: ArrayLike,
    valid_to: ArrayLike,
    params: TemporalParams,
    ended_at: ArrayLike | None = None,
) -> np.ndarray:
    """The temporal signal of vectors at time ``at``.

    ``anchor="created"`` (the paper): ``2^(-age/H_t)`` with age since creation, or
    ``outside_window`` when ``at`` is before ``valid_from`` or at/after ``valid_to``.
    ``anchor="validity"``: 1 while in force (``valid_from <= at < end``, ``end`` the earlier
    of ``valid_to`` and ``ended_at``: when it was superseded or lost a contradiction, if by
    ``at``), ``2^(-(at - end)/H_t)`` once ended, ``outside_window`` before ``valid_from``.
    Callers drop vectors created after ``at``; a negative age is clamped to 0, never a bonus.
    """
    vf = np.asarray(valid_from, dtype=np.float64)
    vt = np.asarray(valid_to, dtype=np.float64)
    if params.anchor == "validity":
        end = vt if ended_at is None else np.minimum(vt, np.asarray(ended_at, np.float64))
        since = np.maximum(at - end, 0.0) / DAY
        out = np.where(at < end, 1.0, np.exp2(-since / params.half_life_days))
        return np.where(vf <= at, out, params.outside_window)
    age = np.maximum(at - np.asarray(created_at, dtype=np.float64), 0.0) / DAY
    fresh = np.exp2(-age / params.half_life_days)
    inside = (vf <= at) & (at < vt)
    return np.where(inside, fresh, params.outside_window)


def relational_signal(n_edges: ArrayLike, params: RelationalParams) -> np.ndarray:
    """``min(cap, scale * ln(1 + edges))``."""
    n = np.maximum(np.asarray(n_edges, dtype=np.float64), 0.0)
    return np.minimum(params.cap, params.scale * np.log1p(n))


def combine(
    weights: ScoringWeights,
    semantic: ArrayLike,
    temporal: ArrayLike,
    confidence: ArrayLike,
    relational: ArrayLike,
) -> np.ndarray:
    """Weighted sum of the four signals with the weights normalised to sum to 1.

    The weights are scaled by the largest (so no sum overflows) and the weighted sum is
    divided once by the sum of the same weights: rounding is monotone, so signals in
    ``[0, 1]`` give a score in ``[0, 1]`` (dividing each weight first can overshoot 1).
    """
    w = np.asarray(weights.as_tuple(), dtype=np.float64)
    ws, wt, wc, wr = (w / w.max()).tolist()
    return (
        ws * np.asarray(semantic, dtype=np.float64)
        + wt * np.asarray(temporal, dtype=np.float64)
        + wc * np.asarray(confidence, dtype=np.float64)
        + wr * np.asarray(relational, dtype=np.float64)
    ) / (ws + wt + wc + wr)
