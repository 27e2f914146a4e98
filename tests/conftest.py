"""Shared fixtures for the smartvector tests (kept small: a fast embedder and a store factory)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from smartvector import HashingEmbedder, SmartVectorStore, StoreConfig


@pytest.fixture
def embedder() -> HashingEmbedder:
    """The deterministic hashing embedder (no model needed)."""
    return HashingEmbedder(dim=256)


@pytest.fixture
def make_store(embedder: HashingEmbedder) -> Callable[..., SmartVectorStore]:
    """Factory ``make_store(index="exact", config=None, emb=None)``: a fresh, empty store."""

    def make(index: str = "exact", config: StoreConfig | None = None,
             emb: object | None = None) -> SmartVectorStore:
        return SmartVectorStore(emb or embedder, index, config)

    return make
