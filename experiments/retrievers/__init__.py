"""Retrieval methods, each a :class:`~experiments.retrievers.base.Retriever` registered by
kind: SmartVector and its ablations, cosine baselines, LangChain's time-weighted retriever,
the oracle, BM25, a hybrid and a real vector database. ``conf/methods/<name>.yaml`` configures
one method: its kind and its hyperparameters."""

from __future__ import annotations

import importlib

from .base import (
    Context,
    QueryInput,
    RankedHit,
    Ranking,
    Retriever,
    kinds,
    make_params,
    make_retriever,
    register,
)

#: modules holding the built-in retrievers (imported on first use of the registry)
BUILTIN = ("store_methods", "bm25", "hybrid", "qdrant")


def load_builtin() -> None:
    """Import every built-in retriever module (each registers its kinds)."""
    for mod in BUILTIN:
        importlib.import_module(f"{__name__}.{mod}")


__all__ = ["Context", "QueryInput", "RankedHit", "Ranking", "Retriever", "kinds",
           "load_builtin", "make_params", "make_retriever", "register"]
