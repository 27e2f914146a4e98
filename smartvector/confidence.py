"""The confidence engine: the paper's closed form, vectorised over numpy arrays.

``C = clip(max(floor, C0 * 2^(-age/H)) + a*pos - b*neg + min(cap, r*ln(1+accesses))
- penalties, floor, 1)`` where ``age`` is the time since the vector was created (as in the
reference proof-of-concept), ``pos``/``neg`` count accepted/corrected answers (a correction
weighs more), and ``penalties`` sums ripple and contradiction penalties.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .config import ConfidenceParams


class ConfidenceEngine:
    """Live confidence from base confidence, age, feedback, accesses and penalties."""

    def __init__(self, params: ConfidenceParams | None = None) -> None:
        self.params = params or ConfidenceParams()

    def decay(self, base: ArrayLike, age_days: ArrayLike) -> np.ndarray:
        """Ebbinghaus decay ``C0 * 2^(-age/H)``, never below the floor; age < 0 counts as 0."""
        age = np.maximum(np.asarray(age_days, dtype=np.float64), 0.0)
        out = np.asarray(base, dtype=np.float64) * np.exp2(-age / self.params.half_life_days)
        return np.maximum(out, self.params.floor)

    def access_boost(self, accesses: ArrayLike) -> np.ndarray:
        """``min(cap, r * ln(1 + accesses))``: diminishing and capped."""
        n = np.maximum(np.asarray(accesses, dtype=np.float64), 0.0)
        p = self.params
        return np.minimum(p.access_cap, p.access_reinforcement * np.log1p(n))

    def compute(
        self,
        base: ArrayLike,
        age_days: ArrayLike,
        positive: ArrayLike = 0,
        negative: ArrayLike = 0,
        accesses: ArrayLike = 0,
        penalty: ArrayLike = 0.0,
    ) -> np.ndarray:
        """Live confidence in ``[floor, 1]``."""
        p = self.params
        c = (
            self.decay(base, age_days)
            + p.positive_boost * np.asarray(positive, dtype=np.float64)
            - p.negative_penalty * np.asarray(negative, dtype=np.float64)
            + self.access_boost(accesses)
            - np.asarray(penalty, dtype=np.float64)
        )
        return np.clip(c, p.floor, 1.0)

    def is_dormant(self, confidence: ArrayLike) -> np.ndarray:
        """True where confidence is below the dormancy threshold."""
        return np.asarray(confidence) < self.params.dormant_threshold
