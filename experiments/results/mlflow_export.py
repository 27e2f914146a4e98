"""Export results directories to MLflow through its public client: one run per method of a
configuration, all with the same metric names (``top1_accuracy``, ``stale_rate``, ``ece``...)
and tagged with the configuration's fingerprint, so MLflow's runs table and charts compare
methods natively (group or filter by ``config_fingerprint``, ``study`` or ``seed``).

A live run and ``python -m experiments.results.import_runs`` log through :func:`log_results`, from
the directory alone. The tracking URI is ``MLFLOW_TRACKING_URI`` when set, else the
configured one; for a local store, artifacts go beside the database (or to an explicit
location), never into a stray ``./mlruns``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.ops.resilience import (
    HOST,
    auth_problem,
    one_line,
    process_alive,
    process_start,
    quiet_mlflow_logs,
    retry_locked,
    sqlite_problem,
    store_lock,
    unreachable,
)
from experiments.results.provenance import flatten
from experiments.results.record import (
    CONFIG_FILE,
    PREDICTIONS_FILE,
    RESULTS_FILE,
    RUN_FILE,
    RunResults,
)

#: Experiment tags that make MLflow's UI open the experiment on its runs table (MLflow 3
#: otherwise guesses the experiment's kind and may land on the GenAI traces overview).
UI_TAGS = {"mlflow.experimentKind": "custom_model_development"}

#: Runs MLflow's chart view draws before the user picks "Show all runs" (its default is
#: "Show first 10"): a configuration with more methods hides the rest's bars.
CHART_RUNS = 10
#: The metrics a person compares first (the UI check looks for them).
KEY_METRICS = ("top1_accuracy", "stale_rate", "contradicted_rate", "ece")
#: Logged beside them (every figure of a method is in its ``results.json`` artifact).
MORE_METRICS = ("ndcg_at_10", "recall_at_5", "doc_recall_at_5", "version_accuracy_at_10",
                "latency_p50_ms")


# --- URIs ---------------------------------------------------------------------------------


def resolve_tracking_uri(configured: str, base_dir: Path) -> str:
    """``MLFLOW_TRACKING_URI`` wins; a relative sqlite path is made absolute and a PostgreSQL
    URI names its driver (see :func:`with_pg_driver`)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") or configured
    return with_pg_driver(absolute_sqlite(uri, base_dir))


def with_pg_driver(uri: str) -> str:
    """``postgresql://`` -> ``postgresql+psycopg2://`` when psycopg2 is what is installed
    (SQLAlchemy 2.1 reads a bare ``postgresql://`` as psycopg 3)."""
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


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else None."""
    prefix = "sqlite:///"
    return Path(uri[len(prefix):].split("?", 1)[0]) if uri.startswith(prefix) else None


def absolute_sqlite(uri: str, base_dir: Path) -> str:
    """A relative ``sqlite:///path`` made absolute against ``base_dir``; others unchanged."""
    db = sqlite_path(uri)
    if db is not None and not db.is_absolute():
        return "sqlite:///" + str((base_dir / db).resolve())
    return uri


def artifact_location_for(tracking_uri: str, configured: str | Path | None,
                          base_dir: Path) -> Path:
    """Where a new experiment keeps its artifacts when the store is not a server: an absolute
    ``configured`` as is; a relative one (default ``mlartifacts``) beside a SQLite database,
    else under ``base_dir``."""
    configured = Path(configured or "mlartifacts")
    if configured.is_absolute():
        return configured
    db = sqlite_path(tracking_uri)
    if db is not None and db.is_absolute():
        return (db.parent / configured).resolve()
    return (base_dir / configured).resolve()


def ui_url(server: str, experiment_id: str, results_uid: str | None = None) -> str:
    """The UI page that compares the methods: the experiment's runs in MLflow's chart view
    (a bar chart of each key metric, a bar per method), only one configuration's runs when
    ``results_uid`` is given. (MLflow's table view shows no metric column until one is
    picked.)"""
    from urllib.parse import quote

    url = f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs?compareRunsMode=CHART"
    if results_uid:
        url += "&searchFilter=" + quote(f"tags.results_uid = '{results_uid}'", safe="")
    return url


# --- the store ----------------------------------------------------------------------------


def get_or_create_experiment(client: Any, name: str, artifact_location: Path | None,
                             attempts: int = 5) -> Any:
    """The experiment ``name``, created (tagged with :data:`UI_TAGS`) if missing; safe when
    several jobs do it at once (a create that loses the race is followed by another get)."""
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


class Experiment:
    """An MLflow experiment opened for logging (created if missing). Opening it marks runs
    that this host left RUNNING, and whose process is gone, KILLED (``reaped``)."""

    def __init__(self, tracking_uri: str, name: str, artifact_location: Path | None,
                 *, reap: bool = True) -> None:
        from mlflow import MlflowClient

        quiet_mlflow_logs()
        self.tracking_uri = tracking_uri
        with store_lock(tracking_uri):  # (MLflow's schema creation is not concurrency-safe)
            self.client = MlflowClient(tracking_uri)
            exp = get_or_create_experiment(self.client, name, artifact_location)
        if exp.lifecycle_stage == "deleted":
            raise RuntimeError(
                f"MLflow experiment {name!r} is deleted; restore it (mlflow experiments "
                f"restore --experiment-id {exp.experiment_id}) or choose another "
                "mlflow.experiment")
        self.id = exp.experiment_id
        self.reaped = self.reap_stale_runs() if reap else []

    def search(self, filter_string: str, max_results: int = 1000) -> list[Any]:
        return retry_locked(self.client.search_runs, [self.id], filter_string=filter_string,
                            max_results=max_results)

    def finished_methods(self, tag: str, value: str) -> set[str]:
        """The methods with a FINISHED run tagged ``tag = value``."""
        value = value.replace("'", "\\'")
        runs = self.search(f"tags.{tag} = '{value}' and attributes.status = 'FINISHED'")
        return {r.data.tags.get("method", "") for r in runs}

    def reap_stale_runs(self) -> list[str]:
        """Mark RUNNING runs logged from this host by a process that is gone as KILLED."""
        host = HOST.replace("'", "\\'")
        reaped = []
        for r in self.search(f"attributes.status = 'RUNNING' and tags.host = '{host}'"):
            tags = r.data.tags
            try:
                pid = int(tags.get("pid", ""))
            except ValueError:
                continue
            if process_alive(pid, tags.get("pid_start", "")):
                continue
            # read again: its process may have ended the run between the search and the test
            if retry_locked(self.client.get_run, r.info.run_id).info.status != "RUNNING":
                continue
            retry_locked(self.client.set_tag, r.info.run_id, "killed_reason",
                         f"process {pid} on {HOST} ended without closing the run")
            retry_locked(self.client.set_terminated, r.info.run_id, "KILLED")
            reaped.append(r.info.run_id)
        return reaped


#: experiments opened by this process (a worker's jobs open the store once)
_OPENED: dict[tuple[str, str], Experiment] = {}


def open_experiment(tracking_uri: str, name: str, artifact_location: Path | None
                    ) -> tuple[Experiment | None, str | None]:
    """``(experiment, None)``, or ``(None, reason)`` when the store cannot be used now
    (server down, unwritable database, refused credentials...). Fails within seconds. An
    experiment this process opened before is reused (its ``reaped`` list then empty)."""
    reason = unreachable(tracking_uri) or sqlite_problem(tracking_uri)
    if reason is not None:
        return None, reason
    key = (tracking_uri, name)
    if key in _OPENED:
        _OPENED[key].reaped = []
        return _OPENED[key], None
    try:
        _OPENED[key] = Experiment(tracking_uri, name, artifact_location)
        return _OPENED[key], None
    except Exception as e:  # noqa: BLE001 - any failure here means "log later"
        return None, auth_problem(e, tracking_uri) or \
            f"cannot use MLflow store {tracking_uri}: {one_line(e)}"


def finished_on_server(tracking_uri: str, experiment: str, config_fingerprint: str,
                       methods: list[str]) -> bool:
    """Whether a team's tracking store already has every method of this configuration
    FINISHED (False when it cannot tell: the job then runs)."""
    from mlflow import MlflowClient

    if unreachable(tracking_uri) or sqlite_problem(tracking_uri):
        return False
    try:
        client = MlflowClient(tracking_uri)
        exp = client.get_experiment_by_name(experiment)
        if exp is None or exp.lifecycle_stage != "active":
            return False
        runs = client.search_runs(
            [exp.experiment_id], max_results=1000,
            filter_string=f"tags.config_fingerprint = '{config_fingerprint}' and "
                          "attributes.status = 'FINISHED'")
    except Exception:  # noqa: BLE001 - cannot tell: run
        return False
    return set(methods) <= {r.data.tags.get("method") for r in runs}


# --- logging ------------------------------------------------------------------------------


def process_tags() -> dict[str, str]:
    """Who is logging: a run whose process is gone while it is RUNNING is reaped
    (:meth:`Experiment.reap_stale_runs`)."""
    return {"host": HOST, "pid": str(os.getpid()), "pid_start": process_start(os.getpid())}


def method_params(params: Mapping[str, Any], method: str) -> dict[str, Any]:
    """The configuration's parameters less the other methods' ``methods.<name>.*``."""
    own = f"methods.{method}."
    return {k: v for k, v in params.items() if not k.startswith("methods.") or
            k.startswith(own)}


def metric_names(quality: Mapping[str, float], timing: Mapping[str, float]
                 ) -> dict[str, float]:
    """What a method's run logs as metrics: :data:`KEY_METRICS` and :data:`MORE_METRICS`,
    under their own names. MLflow's chart view draws a bar chart of each (a bar per run),
    those of runs with metric sections first, so every other figure (intervals, per-kind
    accuracy, Brier score, paired tests...) stays in the run's ``results.json``."""
    values = {**quality, **timing}
    return {k: float(values[k]) for k in (*KEY_METRICS, *MORE_METRICS) if k in values}


def _dataset_input(results: RunResults) -> Any:
    """The corpus as the run's dataset input, described from the validated summary (the
    raw files are never parsed again)."""
    from mlflow.entities import Dataset, DatasetInput, InputTag

    c = results.corpus
    profile = {"documents": c.documents, "versions": c.versions, "queries": c.queries,
               "injected": c.injected}
    ds = Dataset(name=c.kind, digest=c.fingerprint[:36], source_type="local",
                 source=json.dumps({"uri": c.source}), profile=json.dumps(profile))
    return DatasetInput(ds, [InputTag("mlflow.data.context", "evaluation")])


def log_results(out_dir: Path, experiment: Experiment, *, force: bool = False,
                detail: bool = True) -> list[str]:
    """Log one results directory: a run per method, with its key metrics
    (:func:`metric_names`), the configuration's params, and as artifacts its own rows of the
    predictions and the ranking, the configuration and the results; and a FAILED run naming
    the phase that failed, if one did. Methods already logged from the same execution
    (``results_uid``) are skipped unless ``force``; ``detail=False`` logs no files and no
    dataset input (they stay in the directory the ``results_dir`` tag names). Returns the
    new runs' ids."""
    import pandas as pd
    import yaml
    from mlflow.entities import Metric, Param

    from experiments.results.record import read_results

    out_dir = Path(out_dir)
    results = read_results(out_dir)
    config = yaml.safe_load((out_dir / CONFIG_FILE).read_text(encoding="utf-8"))
    params = {k: v for k, v in flatten(config).items()
              if not k.startswith(("mlflow.", "plots.", "results_root"))}  # (change no result)
    uid = results.provenance.get("results_uid", "")
    done = set() if force or not uid else experiment.finished_methods("results_uid", uid)
    base_tags = {"config_fingerprint": results.config_fingerprint, "study": results.study,
                 "seed": str(results.seed), "dataset_fingerprint": results.corpus.fingerprint,
                 "results_dir": str(out_dir.resolve()), **process_tags(),
                 "results_uid": results.provenance.get("results_uid", ""),
                 "provenance": json.dumps({k: v for k, v in results.provenance.items()
                                           if k != "results_uid"}, sort_keys=True)}
    pred = pd.read_csv(out_dir / PREDICTIONS_FILE, keep_default_na=False, na_values=[""]) \
        if detail and (out_dir / PREDICTIONS_FILE).is_file() else None
    ranking = pd.read_csv(out_dir / RUN_FILE) \
        if detail and (out_dir / RUN_FILE).is_file() else None
    runs = {m: ("FINISHED", r) for m, r in results.methods.items() if m not in done}
    if results.error and results.error["phase"].startswith("method "):
        runs[results.error["phase"][len("method "):]] = ("FAILED", None)
    client = experiment.client
    logged = []
    now = int(time.time() * 1000)
    with tempfile.TemporaryDirectory() as tmp:
        for method, (status, res) in runs.items():
            tags = {**base_tags, "method": method, "mlflow.runName": method}
            if status == "FAILED":
                tags["error"] = f"{results.error['phase']}: {results.error['message']}"[:5000]
            run = retry_locked(client.create_run, experiment.id, tags=tags, run_name=method)
            run_id = run.info.run_id
            try:
                p = {**method_params(params, method), "method": method}
                m = {}
                if res is not None:
                    p |= {f"method.{k}": v for k, v in flatten(res.params).items()}
                    m |= metric_names(res.quality, res.timing)
                ps = [Param(k, str(v)[:6000]) for k, v in p.items()]
                ms = [Metric(k, v, now, 0) for k, v in m.items()]
                while ps or ms:  # MLflow's limits: 100 params, 1000 entries a call
                    bp, ps = ps[:100], ps[100:]
                    bm, ms = ms[:1000 - len(bp)], ms[1000 - len(bp):]
                    retry_locked(client.log_batch, run_id, metrics=bm, params=bp)
                if detail:
                    retry_locked(client.log_inputs, run_id,
                                 datasets=[_dataset_input(results)])
                    _log_files(client, run_id, out_dir, Path(tmp) / method, method,
                               None if res is None else (pred, ranking))
            except KeyboardInterrupt:
                _end(client, run_id, "KILLED")
                raise
            except Exception:
                _end(client, run_id, "FAILED")
                raise
            _end(client, run_id, status)
            logged.append(run_id)
    return logged


def _log_files(client: Any, run_id: str, out_dir: Path, files: Path, method: str,
               frames: tuple[Any, Any] | None) -> None:
    """A method's artifacts: the configuration, the results, the reliability plot and its
    own rows of the predictions and the ranking (``frames``, None for a failed method)."""
    files.mkdir()
    for name in (CONFIG_FILE, RESULTS_FILE, "reliability.png"):
        if (out_dir / name).is_file():
            shutil.copy2(out_dir / name, files / name)
    for frame, name in zip(frames or (), (PREDICTIONS_FILE, RUN_FILE), strict=False):
        if frame is not None:
            frame[frame["method"] == method].to_csv(files / name, index=False)
    retry_locked(client.log_artifacts, run_id, str(files))


def _end(client: Any, run_id: str, status: str) -> None:
    try:
        retry_locked(client.set_terminated, run_id, status)
    except Exception as e:
        if status == "FINISHED":
            raise
        warnings.warn(f"could not mark MLflow run {run_id} {status}: {one_line(e)}",
                      RuntimeWarning, stacklevel=2)
