"""Retrieval methods, each a :class:`~experiments.methods.base.Retriever` registered by
kind: SmartVector and its ablations, cosine baselines, LangChain's time-weighted retriever,
two gold-label references, BM25, a hybrid and a real vector database.
``conf/methods/<name>.yaml`` configures one method: its kind and its hyperparameters."""

from __future__ import annotations

import importlib
import pkgutil

from experiments.methods.base import (
    Context,
    MissingExtraError,
    QueryInput,
    RankedHit,
    Ranking,
    Retriever,
    kinds,
    make_params,
    make_retriever,
    register,
)

_LOADED = False


def load_builtin() -> None:
    """Import every module of this package (each registers its kinds): a new method is one
    module here and one yaml in ``conf/methods/``."""
    global _LOADED
    if _LOADED:
        return
    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")
    _LOADED = True


__all__ = ["Context", "MissingExtraError", "QueryInput", "RankedHit", "Ranking", "Retriever",
           "kinds", "load_builtin", "make_params", "make_retriever", "register"]
