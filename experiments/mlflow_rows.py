"""A parent run's params and metrics and its finished nested runs, written into a SQLite
MLflow store as rows, in one transaction.

Through MLflow's client a run costs ~20-35 ms of CPU on a SQLite store: ``create_run``,
``log_batch`` and ``set_terminated`` open some eight ORM sessions (each a transaction) for a
run of ~90 params and ~30 metrics. A sweep job logs a parent run and a nested run per method,
4,787 runs in the reproduction, and that was ~20% of its sweeps' CPU. Here the same rows (a
nested run, its tags, params, metrics and latest metrics; the parent's params and metrics)
are inserted with SQLAlchemy Core into MLflow's own tables (its ORM models' ``__table__``),
a job's in one transaction: ~1 ms a run. The values go through MLflow's own validation
(``_validate_batch_log_data``) and metric sanitising (NaN, inf) first, and a test compares the
rows, table by table, with those the client writes for the same runs.

A store this module does not handle (not SQLite, not MLflow 3: :func:`rows_store`) is logged
through the client, as is everything else of a run (its creation and end, dataset input,
artifacts), so the parent run still exists RUNNING, and is marked KILLED or reaped, while its
nested runs are written; those appear all at once, FINISHED, or not at all.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class NestedRun:
    """One finished nested run: its name, tags (MLflow's own included), params and metrics."""

    name: str
    tags: Mapping[str, str]
    params: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)


def rows_store(client: Any) -> Any | None:
    """The client's SQLAlchemy store if its runs can be written here (a SQLite store under
    MLflow 3), else None."""
    try:
        import mlflow
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        store = client._tracking_client.store
    except (ImportError, AttributeError):
        return None
    if not mlflow.__version__.startswith("3.") or not isinstance(store, SqlAlchemyStore):
        return None
    return store if store.db_type == "sqlite" else None


def entities(params: Mapping[str, Any], metrics: Mapping[str, float],
             now: int) -> tuple[list, list]:
    """MLflow's ``Param`` and ``Metric`` entities for a run's values, as this project logs
    them (through the client or as rows): values as text cut to 6,000 characters, metrics
    at step 0 and time ``now`` (milliseconds)."""
    from mlflow.entities import Metric, Param

    return ([Param(k, str(v)[:6000]) for k, v in params.items()],
            [Metric(k, float(v), now, 0) for k, v in metrics.items()])


def _checked(params: Mapping[str, Any], metrics: Mapping[str, float],
             tags: Mapping[str, str], now: int) -> tuple[list, list, list]:
    """The entities of :func:`entities` and the tags', checked and truncated as
    ``log_batch`` does."""
    from mlflow.entities import RunTag
    from mlflow.utils.validation import _validate_batch_log_data

    ps, ms = entities(params, metrics, now)
    return _validate_batch_log_data(ms, ps, [RunTag(k, str(v)) for k, v in tags.items()])


def _value_rows(store: Any, run_id: str, params: list, metrics: list,
                tags: list) -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {
        "tags": [{"key": t.key, "value": t.value, "run_uuid": run_id} for t in tags],
        "params": [{"key": p.key, "value": p.value, "run_uuid": run_id} for p in params],
        "metrics": [], "latest_metrics": []}
    for m in metrics:
        is_nan, value = store.sanitize_metric_value(m.value)
        row = {"key": m.key, "value": value, "timestamp": m.timestamp, "step": m.step,
               "is_nan": is_nan, "run_uuid": run_id}
        rows["metrics"].append(row)
        rows["latest_metrics"].append(dict(row))
    return rows


def write_runs(store: Any, experiment_id: str, artifact_location: str, parent_id: str,
               params: Mapping[str, Any], metrics: Mapping[str, float],
               children: Sequence[NestedRun]) -> list[str]:
    """Log ``params`` and ``metrics`` to the (new, RUNNING) run ``parent_id`` and write each
    of ``children`` as a FINISHED run, all in one transaction; returns the children's ids.

    The parent must have no metrics yet (its latest metrics are inserted, not merged);
    a child's tags must already hold ``mlflow.runName`` and ``mlflow.parentRunId``."""
    from mlflow.store.tracking.dbmodels.models import (
        SqlLatestMetric,
        SqlMetric,
        SqlParam,
        SqlRun,
        SqlTag,
    )
    from mlflow.utils.mlflow_tags import MLFLOW_USER
    from mlflow.utils.uri import append_to_uri_path
    from sqlalchemy import insert, text

    now = int(time.time() * 1000)
    m, p, _ = _checked(params, metrics, {}, now)
    rows = _value_rows(store, parent_id, p, m, [])
    runs, ids = [], []
    for child in children:
        run_id = uuid.uuid4().hex
        ids.append(run_id)
        m, p, t = _checked(child.params, child.metrics, child.tags, now)
        runs.append({
            "run_uuid": run_id, "name": child.name, "source_type": "UNKNOWN",
            "source_name": "", "entry_point_name": "",
            "user_id": child.tags.get(MLFLOW_USER, "unknown"), "status": "FINISHED",
            "start_time": now, "end_time": now, "deleted_time": None, "source_version": "",
            "lifecycle_stage": "active",
            "artifact_uri": append_to_uri_path(artifact_location, run_id, "artifacts"),
            "experiment_id": int(experiment_id)})
        for table, r in _value_rows(store, run_id, p, m, t).items():
            rows[table] += r
    tables = {"tags": SqlTag, "params": SqlParam, "metrics": SqlMetric,
              "latest_metrics": SqlLatestMetric}
    with store.engine.begin() as conn:
        conn.execute(text("PRAGMA foreign_keys = ON"))  # as MLflow's sessions on SQLite
        if runs:
            conn.execute(insert(SqlRun.__table__), runs)
        for table, model in tables.items():
            if rows[table]:
                conn.execute(insert(model.__table__), rows[table])
    return ids
