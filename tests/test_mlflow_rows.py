"""Nested runs written as rows (experiments.mlflow_rows) hold what MLflow's client writes."""

from __future__ import annotations

import math
import sqlite3
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace

import pytest

from experiments import mlflow_rows, tracking

PARAMS = {"dataset.seed": 3, "methods.smartvector.pool": 50, "note": "ünïcode, 'quoted'",
          "none": None, "flag": True, "long": "x" * 7000}
METRICS = {"corpus_queries": 138, "top1_accuracy/smartvector": 0.62, "nan": math.nan,
           "inf": math.inf, "minus_inf": -math.inf, "tiny": 1e-300}
NESTED = [("plain_cosine", {"study": "t", "method": "plain_cosine"},
           {"method": "plain_cosine", "k": 5}, {"top1_accuracy": 0.31, "ece": math.nan}),
          ("smartvector", {"study": "t", "method": "smartvector"},
           {"method": "smartvector", "k": 5, "pool": 50}, {"top1_accuracy": 0.62}),
          ("empty", {"study": "t"}, {}, {})]

#: columns that differ between two loggings of the same thing (ids are mapped to run names)
_VOLATILE = {"start_time", "end_time", "timestamp", "run_uuid", "artifact_uri",
             "creation_time", "last_update_time"}


def _log(tmp: Path, rows: bool) -> Path:
    uri = f"sqlite:///{tmp}/mlflow.db"
    tracker = tracking.Tracker(uri, "rows", tmp / "artifacts")
    assert (tracker._rows_store is not None) is True  # a SQLite store under MLflow 3
    if not rows:
        tracker._rows_store = None  # the client, a run at a time
    with tracker.run("parent", {"study": "t", "config_fingerprint": "abc"}):
        tracker.log_with_nested(PARAMS, METRICS, NESTED)
    return tmp / "mlflow.db"


def _tables(db: Path) -> dict[str, list[tuple]]:
    """Every table's rows, run ids replaced by run names, times and the store's folder
    blanked, sorted."""
    with closing(sqlite3.connect(db)) as c:
        names = dict(c.execute("SELECT run_uuid, name FROM runs"))
        tables = [t for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='table'")
                  if t != "alembic_version"]
        out = {}
        for t in tables:
            cur = c.execute(f"SELECT * FROM {t}")  # noqa: S608 - the store's own table names
            cols = [d[0] for d in cur.description]
            rows = []
            for row in cur:
                rec = []
                for col, v in zip(cols, row, strict=True):
                    if col in _VOLATILE:
                        v = names.get(v, "<time>") if col == "run_uuid" else "<volatile>"
                    elif isinstance(v, str) and v in names:  # e.g. the parentRunId tag
                        v = names[v]
                    elif isinstance(v, str):
                        v = v.replace(str(db.parent), "<store>")
                    rec.append((col, v))
                rows.append(tuple(rec))
            out[t] = sorted(rows, key=repr)
    return out


def test_rows_are_what_the_client_writes(tmp_path: Path) -> None:
    via_client = _tables(_log(tmp_path / "client", rows=False))
    via_rows = _tables(_log(tmp_path / "rows", rows=True))
    assert len(via_rows["runs"]) == 4 and len(via_rows["params"]) == len(PARAMS) + 2 + 3 + 0
    for table in via_client:
        assert via_rows[table] == via_client[table], table
    # and read back through MLflow: the sanitised values, the truncated param, the statuses
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/rows/mlflow.db")
    exp = client.get_experiment_by_name("rows")
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    parent, smart = runs["parent"], runs["smartvector"]
    assert math.isnan(parent.data.metrics["nan"])  # MLflow keeps infinities as float's max
    assert parent.data.metrics["inf"] == -parent.data.metrics["minus_inf"] == 1.7976931348623157e308
    assert parent.data.params["long"] == "x" * 6000 and parent.data.params["none"] == "None"
    assert smart.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert smart.info.status == "FINISHED" and smart.info.lifecycle_stage == "active"
    assert smart.info.artifact_uri == f"{exp.artifact_location}/{smart.info.run_id}/artifacts"
    assert client.get_metric_history(smart.info.run_id, "top1_accuracy")[0].value == 0.62
    assert smart.data.tags["pid"] and smart.data.tags["host"] == tracking.HOST


def test_a_failed_write_leaves_no_nested_run(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tracker = tracking.Tracker(uri, "rows", tmp_path / "artifacts")
    child = mlflow_rows.NestedRun("child", {"mlflow.runName": "child"}, {"a": 1}, {"m": 1.0})
    from sqlalchemy.exc import IntegrityError

    # the parent's rows come last in no order that matters: an unknown parent breaks the
    # foreign key of its params, and the child's rows, inserted in the same transaction, go
    with pytest.raises(IntegrityError):
        mlflow_rows.write_runs(tracker._rows_store, tracker.experiment_id,
                               tracker._artifact_location, "no-such-run", {"p": 1}, {}, [child])
    with closing(sqlite3.connect(tmp_path / "mlflow.db")) as c:
        assert c.execute("SELECT count(*) FROM runs").fetchone() == (0,)
        assert c.execute("SELECT count(*) FROM params").fetchone() == (0,)


def test_invalid_values_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    from mlflow.exceptions import MlflowException

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tracker = tracking.Tracker(uri, "rows", tmp_path / "artifacts")
    with pytest.raises(MlflowException, match="Invalid value"), tracker.run("parent", {}):
        tracker.log_with_nested({"ok": 1}, {}, [("bad", {}, {"../up": 1}, {})])
    with closing(sqlite3.connect(tmp_path / "mlflow.db")) as c:
        assert c.execute("SELECT name, status FROM runs").fetchall() == [("parent", "FAILED")]
        assert c.execute("SELECT count(*) FROM params").fetchone() == (0,)


def test_only_sqlite_stores_are_written_as_rows(tmp_path: Path) -> None:
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    store = tracking.Tracker(f"sqlite:///{tmp_path}/mlflow.db", "rows",
                             tmp_path / "a")._rows_store
    assert isinstance(store, SqlAlchemyStore)
    other = SimpleNamespace(_tracking_client=SimpleNamespace(store=object()))  # e.g. REST
    assert mlflow_rows.rows_store(other) is None
    assert mlflow_rows.rows_store(object()) is None
    store.db_type = "postgresql"
    try:
        client = SimpleNamespace(_tracking_client=SimpleNamespace(store=store))
        assert mlflow_rows.rows_store(client) is None
    finally:
        store.db_type = "sqlite"


def test_a_store_locked_by_another_writer_is_written_once_it_is_free(tmp_path: Path) -> None:
    """Another process's write transaction (a sweep's other worker) holds the database: the
    rows wait for it (SQLite's busy timeout, then the lock retries) and are written once."""
    import threading
    import time

    tracker = tracking.Tracker(f"sqlite:///{tmp_path}/mlflow.db", "rows", tmp_path / "a")
    held, release = threading.Event(), threading.Event()

    def other_writer() -> None:
        with closing(sqlite3.connect(tmp_path / "mlflow.db", isolation_level=None)) as c:
            c.execute("BEGIN IMMEDIATE")  # the write lock, until released
            held.set()
            release.wait(10)
            c.execute("COMMIT")

    with tracker.run("parent", {}):
        thread = threading.Thread(target=other_writer)
        thread.start()
        held.wait(10)
        threading.Timer(0.5, release.set).start()
        started = time.monotonic()
        tracker.log_with_nested({"p": 1}, {"m": 1.0}, NESTED)
        assert time.monotonic() - started >= 0.4  # it did wait for the other writer
    thread.join()
    with closing(sqlite3.connect(tmp_path / "mlflow.db")) as c:
        assert sorted(n for (n,) in c.execute("SELECT name FROM runs")) == [
            "empty", "parent", "plain_cosine", "smartvector"]
