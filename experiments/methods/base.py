"""The retriever protocol: a method owns its state (a store, an index, a database), ingests
document versions and answers queries at a time; grading happens afterwards, on its ranked
hits. Only a retriever that declares ``needs_gold`` (a reference) is shown the gold labels.

A retriever is a class registered by its ``kind`` (:func:`register`) with a ``Params``
dataclass of its hyperparameters; each configured method (``conf/methods/<name>.yaml``) names
a kind and sets its parameters.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from experiments.data.dataset import DocVersion, Query
from smartvector import StoreConfig
from smartvector.embedders import Embedder

SIGNALS = ("semantic", "temporal", "confidence", "relational")


class MissingExtraError(ImportError):
    """An optional dependency of a method is not installed."""


@dataclass(frozen=True)
class QueryInput:
    """What every retriever sees of a query: its id, text, embedding and time (no gold)."""

    id: str
    text: str
    vector: np.ndarray = field(repr=False)
    asked_at: float


@dataclass(frozen=True)
class RankedHit:
    """One retrieved chunk: which vector, of which document, its text and its score; the four
    SmartVector signals where the method has them."""

    vector_id: str
    doc_id: str
    text: str
    score: float
    signals: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Ranking:
    """A method's answer to one query: hits best first, and the method's raw probability
    that the first is right (in [0, 1]; calibrated later, on dev data)."""

    hits: list[RankedHit]
    probability: float


@dataclass(frozen=True)
class Context:
    """What the harness gives every retriever: the shared (memoised) embedder, the store
    parameters, and the index kind (``exact`` or ``hnsw``) and its options (``ef_search``)
    for methods built on a SmartVector store."""

    embedder: Embedder
    store_config: StoreConfig = field(default_factory=StoreConfig)
    index: str = "exact"
    index_options: tuple[tuple[str, Any], ...] = ()

    def make_index(self) -> Any:
        """A new, empty index of the configured kind."""
        from smartvector.index import make_index

        return make_index(self.index, self.embedder.dim, **dict(self.index_options))


class Retriever(ABC):
    """Base class of every method. Subclasses set ``Params`` and implement ``ingest`` and
    ``search``; ``consolidate`` and ``feedback`` are optional."""

    Params: ClassVar[type] = dataclass(type("NoParams", (), {}))
    #: a time-blind method has no notion of the time a question is about: in the
    #: time-travel protocol it sees the final state
    time_aware: bool = True
    #: only the references: ``search`` receives the gold query
    needs_gold: bool = False

    def __init__(self, name: str, params: Any, ctx: Context) -> None:
        self.name, self.params, self.ctx = name, params, ctx

    @classmethod  # noqa: B027 - an optional hook
    def check(cls, params: Any) -> None:
        """Raise ValueError (or :class:`MissingExtraError`) with a one-line message for what
        the method cannot run with, before any work (e.g. a missing optional package)."""

    def state_key(self) -> Hashable | None:
        """Methods whose keys are equal build the same state from the same replay and never
        change it while searching: they share one state and one replay, each answering the
        queries from it (their other parameters act at search time only). None (the
        default): never shared."""
        return None

    def share_state(self, leader: Retriever) -> None:
        """Answer from ``leader``'s state (same :meth:`state_key`) instead of one's own."""
        raise NotImplementedError(f"{type(self).__name__} shares no state")

    @abstractmethod
    def ingest(self, version: DocVersion) -> int:
        """Add one document version at its ``valid_from``; returns the chunks embedded."""

    def consolidate(self, at: float) -> None:  # noqa: B027 - optional hook
        """A maintenance pass at ``at`` (SmartVector's sleep); nothing by default."""

    @abstractmethod
    def search(self, query: QueryInput, at: float, k: int, gold: Query | None = None
               ) -> Ranking:
        """The top ``k`` as the method sees the corpus at ``at``."""

    def feedback(self, hit: RankedHit, accepted: bool, at: float) -> None:  # noqa: B027
        """A user's judgement of a returned hit; ignored by default."""

    @property
    def size(self) -> int:
        """Vectors (or chunks) held."""
        return 0

    @property
    def recorded_params(self) -> dict[str, Any]:
        """The hyperparameters in force (logged with the run)."""
        return dataclasses.asdict(self.params)


_REGISTRY: dict[str, type[Retriever]] = {}


def register(kind: str):
    """Class decorator: make a retriever available as ``kind`` in method configs."""
    def deco(cls: type[Retriever]) -> type[Retriever]:
        if kind in _REGISTRY:
            raise ValueError(f"retriever kind {kind!r} registered twice")
        _REGISTRY[kind] = cls
        cls.kind = kind
        return cls
    return deco


def kinds() -> dict[str, type[Retriever]]:
    """Every registered kind (importing the built-in retrievers first)."""
    from experiments.methods import load_builtin

    load_builtin()
    return dict(_REGISTRY)


def make_params(name: str, node: dict[str, Any]) -> tuple[type[Retriever], Any]:
    """The class and validated ``Params`` of method ``name`` from its config node; a
    one-line ValueError names the method and the key."""
    node = dict(node)
    kind = node.pop("kind", name)
    registry = kinds()
    if kind not in registry:
        raise ValueError(f"methods.{name}.kind: unknown retriever kind {kind!r} "
                         f"(choose from: {', '.join(sorted(registry))})")
    cls = registry[kind]
    known = {f.name for f in dataclasses.fields(cls.Params)}
    for key in node:
        if key not in known:
            raise ValueError(f"methods.{name}: unknown key {key!r} for kind {kind!r} "
                             f"(known: {', '.join(sorted(known)) or 'none'})")
    try:
        return cls, cls.Params(**node)
    except (TypeError, ValueError) as e:
        raise ValueError(f"methods.{name}: {e}") from None


def make_retriever(name: str, node: dict[str, Any], ctx: Context) -> Retriever:
    """Build method ``name`` from its config node (``kind`` plus parameters)."""
    cls, params = make_params(name, node)
    return cls(name, params, ctx)


def clip01(x: float) -> float:
    """``x`` clipped to [0, 1] (NaN stays NaN)."""
    return float(np.clip(x, 0.0, 1.0))
