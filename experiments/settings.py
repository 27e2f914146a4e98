"""Every value of a run's configuration checked before any work: a bad one stops the run with
one line naming its key (:class:`ConfigError`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from experiments.config import build_frozen, method_store_config
from experiments.data.registry import DatasetKind, config_of, get_kind
from experiments.methods import MissingExtraError, make_params
from experiments.protocol.replay import Schedule
from smartvector import StoreConfig
from smartvector.embedders import ModelUnavailableError, check_available


class ConfigError(ValueError):
    """A configuration value that cannot run."""


@dataclass
class Settings:
    """The checked configuration: the store's config, each method's node, the schedule."""

    store: StoreConfig
    methods: dict[str, dict[str, Any]]
    schedule: Schedule
    dataset: Any
    #: the dataset's registered kind (how to check, generate or find it)
    dataset_kind: DatasetKind


EMBEDDERS = ("hashing", "minilm", "all-MiniLM-L6-v2", "st")
CHUNK_CONTEXTS = ("none", "title")


def validate(cfg: DictConfig, base: Path) -> Settings:
    """Check every value (``base``: the directory paths are relative to); raises
    :class:`ConfigError` with a one-line message."""
    try:
        try:
            store = build_frozen(StoreConfig, OmegaConf.to_container(cfg.store, resolve=True))
        except ValueError as e:  # the library names its own key: say the one the user typed
            raise ValueError(f"store.{e}") from None
        methods = OmegaConf.to_container(cfg.methods, resolve=True)
        if not methods:
            raise ValueError("no methods selected")
        for name, node in methods.items():
            cls, params = make_params(name, node)
            method_store_config(name, store, getattr(params, "store", None))
            cls.check(params)
        _check_run(cfg)
        kind = get_kind(cfg.dataset.kind)
        dataset = config_of(kind, OmegaConf.to_container(cfg.dataset, resolve=True))
        kind.check(dataset)
        _check_embedder(cfg.embedder, base)
    except (ValueError, TypeError, ModelUnavailableError, MissingExtraError) as e:
        raise ConfigError(str(e)) from None
    if cfg.protocol.mode == "time_travel":  # queries "as of" the past record no accesses
        store = dataclasses.replace(store, record_access=False)
    return Settings(store, methods, Schedule(cfg.protocol.consolidate_daily,
                                             cfg.protocol.consolidate_before_queries), dataset,
                    kind)


def _check_run(cfg: DictConfig) -> None:
    """Run-level values no library constructor sees."""
    p = cfg.protocol
    checks = [
        (cfg.seed >= 0, f"seed must be >= 0, got {cfg.seed}"),
        (p.k >= 1, f"protocol.k must be >= 1, got {p.k}"),
        (p.index in ("exact", "hnsw"), f"protocol.index must be 'exact' or 'hnsw', got "
                                       f"{p.index!r}"),
        (min(p.hnsw_ef, p.hnsw_m, p.hnsw_ef_construction) >= 1,
         f"protocol.hnsw_ef, hnsw_m and hnsw_ef_construction must be >= 1, got {p.hnsw_ef}, "
         f"{p.hnsw_m}, {p.hnsw_ef_construction}"),
        (p.chunk_context in CHUNK_CONTEXTS, f"protocol.chunk_context must be one of "
                                            f"{', '.join(CHUNK_CONTEXTS)}, got "
                                            f"{p.chunk_context!r}"),
        (p.mode in ("replay", "time_travel"), f"protocol.mode must be replay or time_travel, "
                                              f"got {p.mode!r}"),
        (0.0 <= p.feedback_rate <= 1.0, f"protocol.feedback_rate must be in [0, 1], got "
                                        f"{p.feedback_rate}"),
        (p.feedback_rate == 0 or p.mode == "replay",
         "protocol.feedback_rate needs protocol.mode=replay"),
        (cfg.query_split in ("all", "dev", "test"), f"query_split must be all, dev or test, "
                                                    f"got {cfg.query_split!r}"),
        (cfg.n_boot >= 1, f"n_boot must be >= 1, got {cfg.n_boot}"),
        (cfg.reembed.n_edits >= 0, f"reembed.n_edits must be >= 0 (0 skips it), got "
                                   f"{cfg.reembed.n_edits}"),
        (cfg.reembed.window >= 1 and 0 <= cfg.reembed.overlap < cfg.reembed.window,
         f"reembed needs window >= 1 and 0 <= overlap < window, got window "
         f"{cfg.reembed.window}, overlap {cfg.reembed.overlap}"),
        (not cfg.mlflow.enabled or str(cfg.mlflow.experiment).strip(),
         "mlflow.experiment must not be empty"),
        (str(cfg.results_root).strip(), "results_root must not be empty"),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)


def _check_embedder(e: DictConfig, base: Path) -> None:
    if e.name not in EMBEDDERS:
        raise ValueError(f"unknown embedder {e.name!r} (choose from: hashing, minilm, st)")
    if e.name == "st" and not e.path:
        raise ValueError("embedder.path is required for embedder=st (a local "
                         "sentence-transformers model directory)")
    if e.name != "hashing":
        path = str(base / e.path) if e.path else None
        if e.backend:
            check_available(e.backend, path)
        else:
            check_available(path=path)
