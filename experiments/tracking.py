"""MLflow tracking: one experiment per study, a parent run per configuration and a nested
run per method, with consistent metric names so runs compare side by side in the UI.

The tracking URI is ``MLFLOW_TRACKING_URI`` when set, else the configured one (default
``sqlite:///mlflow.db`` in the directory the command was started from); artifacts go to an
explicit location (default ``./mlartifacts``) so they never land in a stray ``./mlruns``.

What a run logs is decided once, when it finishes: :func:`write_record` puts a
``mlflow_run.json`` next to ``metrics.json`` and :func:`log_output_dir` logs an output
directory from those files alone. A live run and a later import
(``python -m experiments.import_runs``) therefore create the same runs.

Robustness: every run carries ``host``/``pid``/``pid_start`` tags and ends FINISHED, FAILED
or KILLED (Ctrl-C, or SIGTERM inside :func:`sigterm_as_interrupt`); a run whose process was
SIGKILLed is marked KILLED by the next :class:`Tracker` opened on the same experiment from
the same host. On a SQLite store a parent run's nested runs are written as rows in one
transaction (:mod:`experiments.mlflow_rows`, ~25x cheaper than MLflow's client): all of them
FINISHED, or none. Writes to a SQLite store retry on "database is locked", and opening a SQLite
store is serialised across processes (schema creation is not concurrency-safe in MLflow),
and SQLite stores are written in WAL mode (commits do not wait for the disk, readers do not
block writers: :func:`~experiments.resilience.wal_sqlite_stores`).

Team servers (``python -m experiments.team_server``): with an ``http(s)://`` tracking URI the
artifacts go through the server (its ``--artifacts-destination``), never to a local folder;
credentials come from ``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD``; experiments
are tagged so that the UI opens on the runs table, and each parent run carries every method's
key metrics (``top1_accuracy/<method>``...) so one row of that table compares the methods.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from smartvector.fileio import atomic_write_text

from .mlflow_rows import NestedRun, entities, rows_store, write_runs
from .resilience import (  # noqa: F401 - re-exported for the runner and import command
    HOST,
    Terminated,
    apply_http_defaults,
    auth_problem,
    is_lock_error,
    one_line,
    process_alive,
    process_start,
    quiet_mlflow_logs,
    retry_locked,
    sigterm_as_interrupt,
    sqlite_problem,
    store_lock,
    unreachable,
    wal_sqlite_stores,
)

PACKAGES = ("smartvector-bench", "numpy", "hnswlib", "sentence-transformers", "torch",
            "mlflow", "hydra-core")

#: The file in an output directory that says what to log for it (see :func:`write_record`).
RECORD_FILE = "mlflow_run.json"


#: Experiment tags that make MLflow's UI open the experiment on its runs table (MLflow 3
#: otherwise guesses the experiment's kind and may land on the GenAI traces overview).
UI_TAGS = {"mlflow.experimentKind": "custom_model_development"}

#: Per-method metrics copied onto the parent run as ``<metric>/<method>`` (one row compares).
KEY_METRICS = ("top1_accuracy", "stale_rate", "contradicted_rate", "ece")

#: The experiment's shared UI view (tag ``mlflow.sharedViewState.<key>``) that shows those
#: columns; open it with :func:`ui_url`.
VIEW_KEY = "methods"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"


def ui_url(server: str, experiment_id: str) -> str:
    """The UI page that compares the methods: the runs table with their key metrics."""
    return f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs?viewStateShareKey={VIEW_KEY}"


def view_state(metric_keys: list[str], previous: str | None = None) -> str:
    """The UI state (JSON) of the runs table showing ``metric_keys`` (``<metric>/<method>``)
    first, merged with a ``previous`` state's columns (jobs of a sweep may run other methods).
    """
    keys: list[str] = []
    if previous:
        try:
            old = json.loads(previous).get("columnOrder", [])
        except (ValueError, AttributeError):
            old = []
        keys = [c[len("metrics.`"):-1] for c in old if str(c).startswith("metrics.`")]
    keys += [k for k in metric_keys if k not in keys]
    order = {m: i for i, m in enumerate(KEY_METRICS)}
    keys.sort(key=lambda k: order.get(k.split("/", 1)[0], len(order)))  # stable: by metric
    cols = [f"metrics.`{k}`" for k in keys]
    return json.dumps({"selectedColumns": [*cols, "params.`seed`"],
                       "columnOrder": ["attributes.`Run Name`", *cols],
                       "columnWidths": {c: 24 + 7 * len(k) for c, k in zip(cols, keys,
                                                                          strict=True)},
                       "runsHiddenMode": "SHOW_ALL"}, separators=(",", ":"))


def resolve_tracking_uri(configured: str, base_dir: Path) -> str:
    """``MLFLOW_TRACKING_URI`` wins; a relative sqlite path is made absolute and a PostgreSQL
    URI names its driver (see :func:`with_pg_driver`)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") or configured
    return with_pg_driver(absolute_sqlite(uri, base_dir))


def with_pg_driver(uri: str) -> str:
    """``postgresql://`` -> ``postgresql+psycopg2://`` when psycopg2 is what is installed.

    SQLAlchemy 2.1 reads a bare ``postgresql://`` as psycopg 3; the ``[cluster]`` extra ships
    psycopg2, so a URI that does not name a driver would fail with "No module named psycopg".
    """
    import importlib.util

    for bare in ("postgresql://", "postgres://"):
        if uri.startswith(bare):
            if importlib.util.find_spec("psycopg") is None and \
                    importlib.util.find_spec("psycopg2") is not None:
                return "postgresql+psycopg2://" + uri[len(bare):]
            return "postgresql://" + uri[len(bare):]
    return uri


def is_server_uri(uri: str) -> bool:
    """True for a tracking server (``http://``/``https://``), False for a database or files."""
    return uri.split("://", 1)[0].lower() in ("http", "https")


def artifact_location_for(tracking_uri: str, configured: str | Path, base_dir: Path) -> Path:
    """Where a new experiment keeps its artifacts when the store is not a server: an absolute
    ``configured`` as is; a relative one next to a SQLite database (so artifacts follow
    ``MLFLOW_TRACKING_URI=sqlite:////elsewhere/mlflow.db``), else under ``base_dir``.
    (With a server URI the location is ignored: the server stores the artifacts.)"""
    configured = Path(configured)
    if configured.is_absolute():
        return configured
    prefix = "sqlite:///"
    if tracking_uri.startswith(prefix):
        db = Path(tracking_uri[len(prefix):].split("?", 1)[0])
        if db.is_absolute():
            return (db.parent / configured).resolve()
    return (base_dir / configured).resolve()


def sqlite_file_missing(tracking_uri: str) -> bool:
    """True for a local SQLite store whose database file does not exist yet: nothing in it
    is finished (and nothing should create it just to ask)."""
    prefix = "sqlite:///"
    return tracking_uri.startswith(prefix) and not Path(
        tracking_uri[len(prefix):].split("?", 1)[0]).is_file()


def absolute_sqlite(uri: str, base_dir: Path) -> str:
    """A relative ``sqlite:///path`` made absolute against ``base_dir``; others unchanged."""
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
    """MLflow client for one experiment: runs that never stay RUNNING, lock-tolerant writes.

    Opening it creates the experiment if needed (tolerating a concurrent create) and marks
    runs that this host left RUNNING and whose process is gone as KILLED (``self.reaped``).
    """

    def __init__(self, tracking_uri: str, experiment: str, artifact_location: Path,
                 *, reap: bool = True) -> None:
        from mlflow import MlflowClient

        quiet_mlflow_logs()
        wal_sqlite_stores()
        self.tracking_uri = tracking_uri
        self._stack: list[str] = []
        self._context_tags: dict[str, str] | None = None
        with store_lock(tracking_uri):
            self.client = MlflowClient(tracking_uri)  # opens the store (creates the schema)
            exp = get_or_create_experiment(self.client, experiment, artifact_location)
            if exp.lifecycle_stage == "deleted":
                raise RuntimeError(
                    f"MLflow experiment {experiment!r} is deleted; restore it "
                    f"(mlflow experiments restore --experiment-id {exp.experiment_id}) or "
                    "choose another mlflow.experiment")
            self.experiment_id = exp.experiment_id
            self._artifact_location = exp.artifact_location
            self.reaped = self.reap_stale_runs() if reap else []
        self._rows_store = rows_store(self.client)

    # -- queries --

    def _search(self, filter_string: str, max_results: int = 1000) -> list[Any]:
        return retry_locked(self.client.search_runs, [self.experiment_id],
                            filter_string=filter_string, max_results=max_results)

    def finished_run(self, config_fingerprint: str) -> str | None:
        """Id of a FINISHED run of the same configuration, if any."""
        return self.find_run("config_fingerprint", config_fingerprint)

    def find_run(self, tag: str, value: str, status: str = "FINISHED") -> str | None:
        """Id of a parent (not nested) run with ``tags.<tag> = value`` and the given status."""
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

        value = value.replace("'", "\\'")
        runs = self._search(f"tags.{tag} = '{value}' and attributes.status = '{status}'", 200)
        parents = [r for r in runs if MLFLOW_PARENT_RUN_ID not in r.data.tags]
        return parents[0].info.run_id if parents else None

    def reap_stale_runs(self) -> list[str]:
        """Mark RUNNING runs logged from this host by a process that is gone as KILLED."""
        host = HOST.replace("'", "\\'")
        reaped = []
        for r in self._search(f"attributes.status = 'RUNNING' and tags.host = '{host}'"):
            tags = r.data.tags
            try:
                pid = int(tags.get("pid", ""))
            except ValueError:
                continue
            if process_alive(pid, tags.get("pid_start", "")):
                continue
            # read again now that its process is known to be gone: it may have ended the run
            # between the search and the test (only a run it left RUNNING is stale)
            if retry_locked(self.client.get_run, r.info.run_id).info.status != "RUNNING":
                continue
            retry_locked(self.client.set_tag, r.info.run_id, "killed_reason",
                         f"process {pid} on {HOST} ended without closing the run")
            retry_locked(self.client.set_terminated, r.info.run_id, "KILLED")
            reaped.append(r.info.run_id)
        return reaped

    # -- runs --

    @property
    def run_id(self) -> str:
        if not self._stack:
            raise RuntimeError("no active run: use `with tracker.run(...)`")
        return self._stack[-1]

    @contextmanager
    def run(self, name: str, tags: Mapping[str, str], nested: bool = False) -> Iterator[Any]:
        """A run that ends FINISHED, KILLED (Ctrl-C, SIGTERM) or FAILED: never stuck RUNNING.

        Tagged with ``host``, ``pid`` and ``pid_start`` so that if the process is SIGKILLed a
        later Tracker can tell the run is orphaned.
        """
        run = retry_locked(self.client.create_run, self.experiment_id,
                           tags=self._run_tags(name, tags, nested), run_name=name)
        run_id = run.info.run_id
        self._stack.append(run_id)
        status = "FAILED"
        try:
            yield run
            status = "FINISHED"
        except KeyboardInterrupt:
            status = "KILLED"
            raise
        finally:
            self._stack.pop()
            try:
                retry_locked(self.client.set_terminated, run_id, status)
            except Exception as e:
                if status == "FINISHED":
                    raise
                warnings.warn(f"could not mark MLflow run {run_id} {status}: {one_line(e)}",
                              RuntimeWarning, stacklevel=3)

    def _run_tags(self, name: str, tags: Mapping[str, Any], nested: bool) -> dict[str, str]:
        """A new run's tags: ``tags``, MLflow's context tags, the process and the name."""
        from mlflow.tracking.context import registry as context_registry
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

        all_tags = {**{k: str(v) for k, v in tags.items()}, "host": HOST,
                    "pid": str(os.getpid()), "pid_start": process_start(os.getpid()),
                    MLFLOW_RUN_NAME: name}
        if nested and self._stack:
            all_tags[MLFLOW_PARENT_RUN_ID] = self._stack[-1]
        if self._context_tags is None:  # the same for every run of this process
            self._context_tags = context_registry.resolve_tags()
        return {**self._context_tags, **all_tags}

    def log_with_nested(self, params: Mapping[str, Any], metrics: Mapping[str, float],
                        nested: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any],
                                               Mapping[str, float]]]) -> None:
        """Log ``params`` and ``metrics`` to the active run, which must have no metrics
        yet, and add a FINISHED nested run per ``(name, tags, params, metrics)``.

        On a SQLite store the rows are written in one transaction
        (:mod:`experiments.mlflow_rows`: ~1 ms a run instead of ~25): the nested runs appear
        together or not at all. Elsewhere through the client, a run at a time."""
        if self._rows_store is not None:
            children = [NestedRun(name, self._run_tags(name, tags, True), p, m)
                        for name, tags, p, m in nested]
            retry_locked(write_runs, self._rows_store, self.experiment_id,
                         self._artifact_location, self.run_id, params, metrics, children)
            return
        self.log_batch(params, metrics)
        for name, tags, p, m in nested:
            with self.run(name, tags, nested=True):
                self.log_batch(p, m)

    def show_in_ui(self, metric_keys: list[str]) -> None:
        """Add ``metric_keys`` to the experiment's shared UI view (see :func:`ui_url`).
        Best effort: the runs are logged whether or not the view can be updated."""
        try:
            exp = retry_locked(self.client.get_experiment, self.experiment_id)
            state = view_state(metric_keys, exp.tags.get(VIEW_TAG))
            if state != exp.tags.get(VIEW_TAG):
                retry_locked(self.client.set_experiment_tag, self.experiment_id, VIEW_TAG,
                             state)
        except Exception as e:  # noqa: BLE001 - only the UI's columns depend on it
            warnings.warn(f"could not update the UI view of the experiment: {one_line(e)}",
                          RuntimeWarning, stacklevel=2)

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            retry_locked(self.client.log_batch, self.run_id, params=items[i: i + 100])

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
        for i in range(0, len(items), 1000):
            retry_locked(self.client.log_batch, self.run_id, metrics=items[i: i + 1000])

    def log_batch(self, params: Mapping[str, Any] | None = None,
                  metrics: Mapping[str, float] | None = None) -> None:
        """Params and metrics together, in as few ``log_batch`` calls (store transactions)
        as MLflow's limits allow (100 params, 1000 entries per call)."""
        ps, ms = entities(params or {}, metrics or {}, int(time.time() * 1000))
        while ps or ms:
            p, ps = ps[:100], ps[100:]
            m, ms = ms[: 1000 - len(p)], ms[1000 - len(p):]
            retry_locked(self.client.log_batch, self.run_id, metrics=m, params=p)

    def log_artifacts(self, paths: list[Path]) -> None:
        for p in paths:
            if p.exists():
                retry_locked(self.client.log_artifact, self.run_id, str(p))

    def log_dataset(self, frame, source: str, name: str, digest: str) -> None:
        """Log the corpus as the run's dataset input (MLflow's schema hints silenced)."""
        import mlflow.data
        from mlflow.entities import DatasetInput, InputTag
        from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            ds = mlflow.data.from_pandas(frame, source=source, name=name, digest=digest[:36])
            entity = DatasetInput(ds._to_mlflow_entity(),
                                  [InputTag(MLFLOW_DATASET_CONTEXT, "evaluation")])
        retry_locked(self.client.log_inputs, self.run_id, datasets=[entity])


def get_or_create_experiment(client: Any, name: str, artifact_location: Path | None,
                             attempts: int = 5) -> Any:
    """The experiment ``name``, created (tagged with :data:`UI_TAGS`) if missing.

    Safe when several jobs do it at once: a create that loses the race (unique constraint,
    ``RESOURCE_ALREADY_EXISTS``) is followed by another get. With a server URI the server
    picks the artifact location (its artifact proxy); otherwise ``artifact_location``.
    """
    for attempt in range(attempts):
        exp = retry_locked(client.get_experiment_by_name, name)
        if exp is not None:
            if exp.lifecycle_stage == "active" and any(
                    exp.tags.get(k) != v for k, v in UI_TAGS.items()):
                try:  # older experiments: open on the runs table too (needs EDIT permission)
                    for k, v in UI_TAGS.items():
                        retry_locked(client.set_experiment_tag, exp.experiment_id, k, v)
                except Exception:  # noqa: BLE001 - only the UI's landing tab depends on it
                    pass
            return exp
        location = None
        if artifact_location is not None and not is_server_uri(client.tracking_uri):
            Path(artifact_location).mkdir(parents=True, exist_ok=True)
            location = Path(artifact_location).as_uri()
        try:
            retry_locked(client.create_experiment, name, artifact_location=location,
                         tags=dict(UI_TAGS))
        except Exception:  # noqa: BLE001 - a parallel job may have created it first
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def open_tracker(tracking_uri: str, experiment: str,
                 artifact_location: Path) -> tuple[Tracker | None, str | None]:
    """``(tracker, None)``, or ``(None, reason)`` when the store cannot be used right now
    (server down, unwritable database, deleted experiment...). Fails within seconds."""
    reason = unreachable(tracking_uri) or sqlite_problem(tracking_uri)
    if reason is not None:
        return None, reason
    try:
        return Tracker(tracking_uri, experiment, artifact_location), None
    except Exception as e:  # noqa: BLE001 - any failure here means "log later"
        return None, auth_problem(e, tracking_uri) or \
            f"cannot use MLflow store {tracking_uri}: {one_line(e)}"


def open_for_run(tracking_uri: str, experiment: str, artifact_location: Path,
                 config_fingerprint: str, skip_finished: bool
                 ) -> tuple[dict[str, Any], Tracker | None]:
    """What a run needs from the store before it logs: ``(status, tracker)``.

    ``status["state"]`` is ``finished`` (with ``skip_finished``, the configuration already has
    a FINISHED run: ``run_id``), ``offline`` (the store cannot be used: ``reason``) or
    ``ready`` (``reaped``: runs marked KILLED on opening); the tracker is None unless
    ``ready``. The quick test (:func:`finished_configurations`) comes first, so that a
    finished configuration opens no tracker."""
    apply_http_defaults()
    if skip_finished:
        done = (finished_configurations(tracking_uri, experiment) or {}).get(config_fingerprint)
        if done:
            return {"state": "finished", "run_id": done}, None
    tracker, offline = open_tracker(tracking_uri, experiment, artifact_location)
    if tracker is None:
        return {"state": "offline", "reason": offline}, None
    reaped = list(tracker.reaped)
    if skip_finished:
        try:
            done = tracker.finished_run(config_fingerprint)
        except Exception as e:  # noqa: BLE001 - the store failed: run, log later
            return {"state": "offline", "reaped": reaped,
                    "reason": f"cannot query {tracking_uri}: {one_line(e)}"}, None
        if done:
            return {"state": "finished", "run_id": done, "reaped": reaped}, None
    return {"state": "ready", "reaped": reaped}, tracker


#: Per process: ``(tracking URI, experiment)`` -> the finished configurations read from the
#: store (``None``: the store could not answer that query; callers fall back to
#: :meth:`Tracker.finished_run`).
_FINISHED: dict[tuple[str, str], dict[str, str] | None] = {}


def finished_configurations(tracking_uri: str, experiment: str) -> dict[str, str] | None:
    """Config fingerprint -> id of a FINISHED parent run, for every finished configuration
    of ``experiment``: one search, read once per process and kept (a sweep's jobs that run
    in the same worker process share it). The quick skip test of a sweep whose
    configurations are already in the store; it never opens a :class:`Tracker` (no
    experiment created, no runs reaped) and never creates a SQLite database.

    ``{}`` when the store holds no such experiment; ``None`` when the store cannot answer
    right now (unreachable, locked, an older server without ``IS NULL`` in searches...):
    the caller then asks :meth:`Tracker.finished_run` as before. A configuration finished
    after the read is not in the map: that same exact query finds it.
    """
    key = (tracking_uri, experiment)
    if key not in _FINISHED:
        try:
            _FINISHED[key] = _read_finished(tracking_uri, experiment)
        except Exception:  # noqa: BLE001 - an optimisation only: fall back to the exact query
            _FINISHED[key] = None
    return _FINISHED[key]


def _read_finished(tracking_uri: str, experiment: str) -> dict[str, str] | None:
    if sqlite_file_missing(tracking_uri):
        return {}  # no database yet: nothing finished (and do not create one here)
    if unreachable(tracking_uri) or sqlite_problem(tracking_uri):
        return None
    from mlflow import MlflowClient

    quiet_mlflow_logs()
    wal_sqlite_stores()
    with store_lock(tracking_uri):
        client = MlflowClient(tracking_uri)
    exp = retry_locked(client.get_experiment_by_name, experiment)
    if exp is None or exp.lifecycle_stage != "active":
        return {} if exp is None else None
    found: dict[str, str] = {}
    token = None
    while True:  # newest first: the run a per-configuration search would name
        page = retry_locked(client.search_runs, [exp.experiment_id],
                            filter_string="attributes.status = 'FINISHED' and "
                                          "tags.`mlflow.parentRunId` IS NULL",
                            max_results=1000, order_by=["attributes.start_time DESC"],
                            page_token=token)
        for r in page:
            fp = r.data.tags.get("config_fingerprint")
            if fp and "mlflow.parentRunId" not in r.data.tags:
                found.setdefault(fp, r.info.run_id)
        token = page.token
        if not token:
            return found


# --- what a run logs, from its output directory ------------------------------------------


def write_record(out_dir: Path, record: Mapping[str, Any]) -> Path:
    """Write ``mlflow_run.json`` atomically (a crash never leaves half a file)."""
    target = Path(out_dir) / RECORD_FILE
    atomic_write_text(target, json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    return target


def read_record(out_dir: Path) -> dict[str, Any]:
    """The ``mlflow_run.json`` of an output directory (ValueError with a one-line reason)."""
    path = Path(out_dir) / RECORD_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{out_dir}: no {RECORD_FILE} (not a finished run directory)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: unreadable: {one_line(e)}") from None
    missing = {"name", "experiment", "tags", "params", "dataset", "artifacts"} - set(record)
    if missing:
        raise ValueError(f"{path}: missing {', '.join(sorted(missing))}")
    if not (Path(out_dir) / "metrics.json").is_file():
        raise ValueError(f"{out_dir}: no metrics.json")
    return record


def log_output_dir(out_dir: Path, tracker: Tracker, *, later: Collection[str] = (),
                   wait: Callable[[], object] | None = None) -> str:
    """Log one finished output directory: a parent run (params, tags, corpus and re-embedding
    metrics, the corpus as a dataset input, the files as artifacts) with a nested run per
    method (its quality and timing metrics, the params of :func:`method_params`). Returns the
    parent run's id.

    Everything comes from the directory (``mlflow_run.json``, ``metrics.json`` and the
    files), so a live run and ``python -m experiments.import_runs`` log the same thing.
    ``later`` names artifacts still being written beside the logging (the reliability plot):
    they are logged last, once ``wait()`` has returned, before the parent run ends.
    """
    import pandas as pd

    out_dir = Path(out_dir)
    record = read_record(out_dir)
    metrics = json.loads((out_dir / "metrics.json").read_text(encoding="utf-8"))
    tags = dict(record["tags"])
    params = record["params"]
    with tracker.run(record["name"], tags) as parent:
        summary = method_summary(metrics)
        ds = record["dataset"]
        corpus = out_dir / ds["corpus"]  # relative to the output dir, or absolute
        if corpus.is_file():
            frame = pd.read_json(corpus, lines=True)
            tracker.log_dataset(frame[["doc_id", "version", "valid_from", "source_type"]],
                                source=str(corpus.parent), name=ds["name"],
                                digest=ds["digest"])
        else:
            warnings.warn(f"{corpus} is gone: the run is logged without its dataset input",
                          RuntimeWarning, stacklevel=2)
        tracker.log_artifacts([out_dir / a for a in record["artifacts"] if a not in later])
        tracker.log_with_nested(params, {
            **{f"corpus_{k}": v for k, v in metrics["corpus"].items()
               if isinstance(v, int | float)},
            **metrics["reembed"], **summary}, [
            (method, {**tags, "method": method},
             {"method": method, **method_params(params, method)},
             {**m["quality"], **m["timing"]}) for method, m in metrics["methods"].items()])
        if later:
            if wait is not None:
                wait()
            tracker.log_artifacts([out_dir / a for a in record["artifacts"] if a in later])
    tracker.show_in_ui(list(summary))
    return parent.info.run_id


def method_params(params: Mapping[str, Any], method: str) -> dict[str, Any]:
    """The parameters of a method's nested run: the configuration's, less the other
    methods' ``methods.<name>.*`` entries (its own are kept). A nested run with every
    method's parameters was misleading, and it took MLflow a third of a job's logging time
    to store them (140 params of a regime-map job, 55 of them methods', 14 runs)."""
    own = f"methods.{method}."
    return {k: v for k, v in params.items() if not k.startswith("methods.") or
            k.startswith(own)}


def mark_failed(uri: str, run_id: str, error: dict[str, str]) -> None:
    """End a logged parent run FAILED, with the failed phase and its one-line error as tags."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    client.set_tag(run_id, "error", f"{error['phase']}: {error['message']}"[:5000])
    client.set_terminated(run_id, status="FAILED")


def method_summary(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Each method's :data:`KEY_METRICS` as ``<metric>/<method>``, for the parent run
    (rounded to 4 decimals for the table; the nested runs keep the exact values)."""
    return {f"{k}/{method}": round(float(m["quality"][k]), 4)
            for k in KEY_METRICS for method, m in metrics["methods"].items()
            if isinstance(m["quality"].get(k), int | float)}


def find_output_dirs(paths: list[Path]) -> list[Path]:
    """Every directory at or under ``paths`` holding a ``mlflow_run.json``, sorted."""
    found: set[Path] = set()
    for p in paths:
        p = Path(p)
        if (p / RECORD_FILE).is_file():
            found.add(p)
        elif p.is_dir():
            found.update(f.parent for f in p.rglob(RECORD_FILE))
    return sorted(found)
