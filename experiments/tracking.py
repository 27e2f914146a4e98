"""MLflow tracking: one experiment per study, a parent run per configuration and a nested
run per method, with consistent metric names so runs compare side by side in the UI.

The tracking URI is ``MLFLOW_TRACKING_URI`` when set, else the configured one (default
``sqlite:///mlflow.db`` in the directory the command was started from); artifacts go to an
explicit location (default ``./mlartifacts``) so they never land in a stray ``./mlruns``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

PACKAGES = ("smartvector-bench", "numpy", "hnswlib", "sentence-transformers", "torch",
            "mlflow", "hydra-core")


def resolve_tracking_uri(configured: str, base_dir: Path) -> str:
    """``MLFLOW_TRACKING_URI`` wins; a relative sqlite path is made absolute."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") or configured
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri[len(prefix):].startswith("/"):
        uri = prefix + str((base_dir / uri[len(prefix):]).resolve())
    return uri


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists become JSON strings."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        elif isinstance(v, list | tuple):
            out[key] = json.dumps(list(v))
        else:
            out[key] = v
    return out


def fingerprint(obj: Any) -> str:
    """Short SHA-256 of a JSON-serialisable object (sorted keys)."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


def git_commit(cwd: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, timeout=10, check=False)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_versions() -> dict[str, str]:
    out = {}
    for p in PACKAGES:
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = "absent"
    return out


class Tracker:
    """Thin wrapper over the MLflow fluent API for one configuration run."""

    def __init__(self, tracking_uri: str, experiment: str, artifact_location: Path) -> None:
        import mlflow

        self.mlflow = mlflow
        mlflow.set_tracking_uri(tracking_uri)
        exp = mlflow.get_experiment_by_name(experiment)
        if exp is None:
            artifact_location.mkdir(parents=True, exist_ok=True)
            try:
                mlflow.create_experiment(experiment, artifact_location=artifact_location.as_uri())
            except Exception:  # noqa: BLE001 - a parallel job may have created it first
                if mlflow.get_experiment_by_name(experiment) is None:
                    raise
            exp = mlflow.get_experiment_by_name(experiment)
        self.experiment_id = exp.experiment_id

    def finished_run(self, config_fingerprint: str) -> str | None:
        """Id of a FINISHED run of the same configuration, if any."""
        runs = self.mlflow.search_runs(
            [self.experiment_id],
            filter_string=f"tags.config_fingerprint = '{config_fingerprint}' "
                          "and attributes.status = 'FINISHED'",
            output_format="list", max_results=1)
        return runs[0].info.run_id if runs else None

    @contextmanager
    def run(self, name: str, tags: Mapping[str, str], nested: bool = False) -> Iterator[Any]:
        """A run that ends FINISHED, KILLED (Ctrl-C) or FAILED: never stuck RUNNING."""
        active = self.mlflow.start_run(run_name=name, experiment_id=self.experiment_id,
                                       tags=dict(tags), nested=nested)
        try:
            yield active
        except KeyboardInterrupt:
            self.mlflow.end_run("KILLED")
            raise
        except BaseException:
            self.mlflow.end_run("FAILED")
            raise
        else:
            self.mlflow.end_run("FINISHED")

    def log_params(self, params: Mapping[str, Any]) -> None:
        items = [(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.mlflow.log_params(dict(items[i: i + 100]))

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        self.mlflow.log_metrics({k: float(v) for k, v in metrics.items()})

    def log_artifacts(self, paths: list[Path]) -> None:
        for p in paths:
            if p.exists():
                self.mlflow.log_artifact(str(p))

    def log_dataset(self, frame, source: str, name: str, digest: str) -> None:
        """Log the corpus as the run's dataset input (MLflow's schema hints silenced)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            ds = self.mlflow.data.from_pandas(frame, source=source, name=name,
                                              digest=digest[:36])
            self.mlflow.log_input(ds, context="evaluation")
