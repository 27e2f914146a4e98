"""What every embedder is: the ``Embedder`` protocol, the error a missing model raises,
and unit-norm rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to float32 rows of shape ``(len(texts), dim)`` with unit L2 norm.

    Every text, including ``""``, gets a finite unit row. ``name`` identifies the model, its
    parameters and backend: two embedders with the same name must give the same vectors (up
    to the last bits; the cache relies on it).
    """

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class ModelUnavailableError(RuntimeError):
    """A model or its package is missing (the library never downloads from a hub)."""


def _normalise_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as float32."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1.0)).astype(np.float32)
