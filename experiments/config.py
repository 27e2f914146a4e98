"""Structured (dataclass) configs behind ``conf/``: Hydra checks every key and type at
start-up, and ``experiments.settings.validate`` checks the values before any work is done.

The ``store:`` group's schema is derived from the library's :class:`StoreConfig` (no
hand-kept mirror); methods are a config group (``conf/methods/<name>.yaml``, several
selected at once); datasets are registered kinds (:mod:`experiments.data.registry`).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from experiments.data.registry import dataset_kinds
from smartvector import StoreConfig

_SCHEMAS: dict[type, type] = {}


def mutable_schema(cls: type) -> type:
    """A plain (not frozen) dataclass with the same fields, types and defaults as the frozen
    dataclass ``cls``, nested dataclasses included: OmegaConf makes frozen dataclasses
    read-only, so the library's configs cannot serve as Hydra schemas as they are."""
    if cls in _SCHEMAS:
        return _SCHEMAS[cls]
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        if dataclasses.is_dataclass(t):
            sub = mutable_schema(t)
            specs.append((f.name, sub, field(default_factory=sub)))
        elif f.default is not dataclasses.MISSING:
            specs.append((f.name, t, field(default=f.default)))
        else:
            specs.append((f.name, t, field(default_factory=f.default_factory)))
    schema = dataclasses.make_dataclass(f"{cls.__name__}Schema", specs)
    schema.__doc__ = f"Hydra schema of :class:`{cls.__module__}.{cls.__name__}`."
    _SCHEMAS[cls] = schema
    return schema


def build_frozen(cls: type, node: dict[str, Any]) -> Any:
    """Instantiate the library dataclass ``cls`` from a resolved config node, nested
    dataclasses first (each validates itself on construction)."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in node:
            continue
        v = node[f.name]
        kwargs[f.name] = build_frozen(hints[f.name], v) if dataclasses.is_dataclass(
            hints[f.name]) else v
    return cls(**kwargs)


def with_overrides(obj: Any, overrides: dict[str, Any] | None, where: str = "store") -> Any:
    """A copy of the frozen dataclass ``obj`` with nested ``overrides`` applied; a one-line
    ValueError names an unknown key (``where.key``)."""
    if not overrides:
        return obj
    hints = typing.get_type_hints(type(obj))
    names = {f.name for f in dataclasses.fields(obj)}
    changes = {}
    for key, value in overrides.items():
        if key not in names:
            raise ValueError(f"{where}.{key}: unknown key (known: {', '.join(sorted(names))})")
        if dataclasses.is_dataclass(hints[key]) and isinstance(value, dict):
            changes[key] = with_overrides(getattr(obj, key), value, f"{where}.{key}")
        else:
            changes[key] = value
    return dataclasses.replace(obj, **changes)


def method_store_config(name: str, base: Any, overrides: dict[str, Any] | None) -> Any:
    """Method ``name``'s store config: ``base`` with its ``store:`` overrides; a one-line
    ValueError names ``methods.<name>.store`` and the key."""
    where = f"methods.{name}.store"
    try:
        return with_overrides(base, overrides, where)
    except (TypeError, ValueError) as e:
        msg = str(e)
        raise ValueError(msg if msg.startswith("methods.") else f"{where}: {msg}") from None


@dataclass
class EmbedderConfig:
    """``name``: hashing, minilm or st (any sentence-transformers model at ``path``);
    ``backend``: torch or openvino (null: the embedder's default)."""

    name: str = "minilm"
    cache_path: str | None = ".cache/embeddings.sqlite"
    backend: str | None = None
    path: str | None = None


@dataclass
class ProtocolConfig:
    """How a corpus is replayed and asked. ``index``: the vector index of store-based
    methods, ``hnsw`` (hnswlib: graph degree ``hnsw_m``, ``hnsw_ef_construction``, searched
    with ``hnsw_ef``) or ``exact`` (the reference; the paper's studies use it).
    ``benchmarks/bench_index_recall.py`` measured the defaults' recall of every default
    method's pool against exact search on every shipped corpus (results/benchmarks)."""

    k: int = 10  # the depth of every ranking (nDCG@10, Recall@10 and MRR@10 need 10)
    index: str = "hnsw"
    hnsw_ef: int = 512
    hnsw_m: int = 32
    hnsw_ef_construction: int = 400
    consolidate_daily: bool = True
    consolidate_before_queries: bool = True
    mode: str = "replay"  # or "time_travel": ingest everything, then ask each query "as of"
    #: "title": every chunk starts with its document's title (``meta.title``, else its id),
    #: for every method alike (:mod:`experiments.protocol.context`); "none": as written
    chunk_context: str = "none"
    feedback_rate: float = 0.0  # share of queries whose top-1 the simulated user judges


@dataclass
class ReembedConfig:
    n_edits: int = 200
    window: int = 500
    overlap: int = 50


@dataclass
class PlotsConfig:
    """Per-run figures. ``reliability``: draw ``reliability.png`` in the results directory
    (about a second per run; ``experiments.studies.figures`` draws the paper's from the results
    directories, so the paper's studies turn it off). Changes no result: not part of the
    configuration fingerprint."""

    reliability: bool = True


@dataclass
class MlflowConfig:
    """Where and what a run logs (the results directory is the record either way)."""

    enabled: bool = True
    tracking_uri: str = "sqlite:///mlflow.db"
    artifact_location: str = "mlartifacts"
    experiment: str = "${study}"
    #: skip a configuration whose results directory is finished (or, on a tracking server,
    #: whose every method has a FINISHED run)
    skip_finished: bool = True
    #: give each method's run its files (its rows of the predictions and ranking, the
    #: configuration, the results) and the corpus as its dataset input; the paper's studies
    #: log without them (~40% of the logging's cost): they are in the results directory the
    #: run's ``results_dir`` tag names
    detail: bool = True


StoreSchema = mutable_schema(StoreConfig)


@dataclass
class RunConfig:
    study: str = "headline"
    seed: int = 0
    methods: dict[str, Any] = field(default_factory=dict)
    dataset: Any = MISSING
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    store: StoreSchema = field(default_factory=StoreSchema)
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    reembed: ReembedConfig = field(default_factory=ReembedConfig)
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)
    plots: PlotsConfig = field(default_factory=PlotsConfig)
    n_boot: int = 2000
    query_split: str = "all"
    #: where results directories go: ``<results_root>/<study>/<configuration fingerprint>``
    results_root: str = "outputs"


def register() -> None:
    cs = ConfigStore.instance()
    cs.store(name="run_schema", node=RunConfig)
    for name, kind in dataset_kinds().items():
        cs.store(group="dataset", name=f"{name}_schema", node=kind.config)
