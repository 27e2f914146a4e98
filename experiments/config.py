"""Structured (dataclass) configs behind ``conf/``: Hydra checks every key and type at
start-up, and :func:`validate` checks the values before any work is done."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from experiments.corpora.policy_synth import PolicySynthConfig

DEFAULT_METHODS = [
    "plain_cosine", "smartvector", "latest_only", "time_weighted", "lifecycle_only",
    "no_temporal", "no_confidence", "no_relational", "no_semantic", "oracle",
]


@dataclass
class PolicySynthDatasetConfig(PolicySynthConfig):
    """The paper's synthetic corpus, generated (seeded) into the run directory."""

    kind: str = "policy_synth"


@dataclass
class JsonlDatasetConfig:
    """Any dataset directory in the harness's format (see datasets/README.md)."""

    kind: str = "jsonl"
    path: str = MISSING


@dataclass
class EmbedderConfig:
    name: str = "minilm"
    cache_path: str | None = ".cache/embeddings.sqlite"


@dataclass
class WeightsConfig:
    semantic: float = 0.35
    temporal: float = 0.25
    confidence: float = 0.25
    relational: float = 0.15


@dataclass
class StoreParamsConfig:
    confidence_half_life_days: float = 30.0
    temporal_half_life_days: float = 30.0
    dormant_threshold: float = 0.15
    ripple_penalty: float = 0.15
    ripple_max_depth: int = 2
    contradiction_similarity: float = 0.70
    contradiction_penalty: float = 0.15
    dependency_similarity: float = 0.50
    overfetch: int = 10


@dataclass
class ProtocolConfig:
    k: int = 5
    index: str = "exact"
    consolidate_daily: bool = True
    consolidate_before_queries: bool = True
    record_access: bool = True
    mode: str = "replay"  # or "time_travel": ingest everything, then ask each query "as of"
    feedback_rate: float = 0.0  # share of queries whose top-1 the simulated user judges


@dataclass
class ReembedConfig:
    n_edits: int = 200
    window: int = 500
    overlap: int = 50


@dataclass
class MlflowConfig:
    enabled: bool = True
    tracking_uri: str = "sqlite:///mlflow.db"
    artifact_location: str = "mlartifacts"
    experiment: str = "${study}"
    skip_finished: bool = True


@dataclass
class RunConfig:
    study: str = "headline"
    seed: int = 0
    methods: list[str] = field(default_factory=lambda: list(DEFAULT_METHODS))
    dataset: Any = MISSING
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    weights: WeightsConfig = field(default_factory=WeightsConfig)
    store: StoreParamsConfig = field(default_factory=StoreParamsConfig)
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    reembed: ReembedConfig = field(default_factory=ReembedConfig)
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)
    n_boot: int = 2000
    query_split: str = "all"


def register() -> None:
    cs = ConfigStore.instance()
    cs.store(name="run_schema", node=RunConfig)
    cs.store(group="dataset", name="policy_synth_schema", node=PolicySynthDatasetConfig)
    cs.store(group="dataset", name="jsonl_schema", node=JsonlDatasetConfig)
