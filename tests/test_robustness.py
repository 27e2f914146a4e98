"""Bad input, interruption and concurrency (issue 7), mostly through the command line:
one-line errors without tracebacks, no MLflow run left RUNNING after SIGTERM or SIGKILL,
re-runs that skip finished configurations, a dead tracking server with a later import,
and a parallel sweep into one SQLite store."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from experiments import run as runner
from experiments import tracking

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "datasets" / "example"
FAST = ["embedder=hashing", "methods=[plain_cosine,smartvector]", "reembed.n_edits=10",
        "n_boot=100"]
ENV = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}


def _cfg(*overrides: str):
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return compose(config_name="config", overrides=list(overrides))


def _start(args: list[str], cwd: Path = ROOT) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], cwd=cwd, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(proc: subprocess.Popen, timeout: float = 300) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _cli(tmp: Path, *args: str, db: str = "mlflow.db") -> list[str]:
    return ["-m", "experiments.run", *args, f"mlflow.tracking_uri=sqlite:///{tmp}/{db}",
            f"mlflow.artifact_location={tmp}/artifacts"]


def _runs(uri: str, experiment: str) -> list:
    import mlflow

    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=1000)


def _family(runs: list) -> tuple[list, list]:
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return parents, children


# --- bad input ------------------------------------------------------------------------------


def _example() -> tuple[list[dict], list[dict]]:
    read = lambda name: [json.loads(x) for x in (EXAMPLE / name).read_text().splitlines()]  # noqa: E731
    return read("corpus.jsonl"), read("queries.jsonl")


def _write(root: Path, corpus: list, queries: list) -> Path:
    root.mkdir(parents=True)
    for name, items in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        lines = [i if isinstance(i, bytes) else json.dumps(i).encode() for i in items]
        (root / name).write_bytes(b"".join(line + b"\n" for line in lines))
    return root


def _bad_datasets(tmp: Path) -> dict[str, tuple[Path, str]]:
    """name -> (dataset dir, expected start of the error after 'error: ')."""
    c, q = _example()
    cases = {
        "malformed_json": ([c[0], c[1], b'{"doc_id": broken', *c[3:]], q,
                           "corpus.jsonl:3: invalid JSON"),
        "non_utf8": ([c[0], c[1], json.dumps(c[2]).encode().replace(b"SDK", b"S\xffK")],
                     q, "corpus.jsonl:3: not valid UTF-8"),
        "unknown_depends_on": ([c[0], c[1], {**c[2], "depends_on": ["nowhere"]}, *c[3:]], q,
                               "corpus.jsonl:3: field 'depends_on' names unknown doc id"),
        "versions_out_of_order": ([c[1], c[0], *c[2:]], q,
                                  "corpus.jsonl:2: version 1 of doc 'rate-limits' comes after"),
        "unknown_doc_ids": (c, [q[0], {**q[1], "doc_ids": ["ghost"]}],
                            "queries.jsonl:2: field 'doc_ids' names unknown doc id"),
    }
    return {name: (_write(tmp / name, corpus, queries), expected)
            for name, (corpus, queries, expected) in cases.items()}


def test_bad_input_fails_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    jobs: dict[str, tuple[subprocess.Popen, str, int]] = {}
    for name, (path, expected) in _bad_datasets(tmp_path).items():
        args = _cli(tmp_path / name, *FAST, "dataset=jsonl", f"dataset.path={path}",
                    f"hydra.run.dir={tmp_path}/{name}/out")
        jobs[name] = (_start(args), "error: " + expected, 2)
    bad_config = {  # rejected at start-up, before any work
        "n_boot": ("n_boot=0", "error: n_boot must be >= 1, got 0", 2),
        "half_life": ("store.temporal.half_life_days=0",
                      "error: store.temporal.half_life_days must be > 0", 2),
    }
    for name, (override, expected, code) in bad_config.items():
        args = _cli(tmp_path / name, *FAST, override, f"hydra.run.dir={tmp_path}/{name}/out")
        jobs[name] = (_start(args), expected, code)
    jobs["unknown_group"] = (_start(_cli(tmp_path / "group", *FAST, "dataset=nope")),
                             "Could not find 'dataset/nope'", 1)
    for name, (proc, expected, code) in jobs.items():
        res = _finish(proc)
        assert res.returncode == code, (name, res.stderr[-1500:])
        assert "Traceback" not in res.stderr, (name, res.stderr[-1500:])
        if code == 2:
            errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
            assert len(errors) == 1 and errors[0].startswith(expected), (name, res.stderr)
        else:
            assert expected in res.stderr, (name, res.stderr)
        # nothing was tracked: the store is not even created
        assert not list(tmp_path.glob(f"{name}/*.db")), name


def test_unanswerable_query_is_reported_and_excluded(tmp_path: Path) -> None:
    c, q = _example()
    path = _write(tmp_path / "data", c, [*q, {**q[0], "id": "q9", "answer": "999 parsecs"}])
    res = _finish(_start(["-m", "experiments.run", *FAST, "dataset=jsonl",
                          f"dataset.path={path}", "mlflow.enabled=false",
                          f"hydra.run.dir={tmp_path}/out"]))
    assert res.returncode == 0, res.stderr[-2000:]
    warned = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
    assert any("excluded 1 of 3 queries" in w and "q9" in w for w in warned), res.stderr
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["corpus"]["queries"] == 2


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("store.temporal.half_life_days=-1", "store.temporal.half_life_days must be > 0"),
        ("store.confidence.dormant_threshold=1.5",
         "store.confidence.dormant_threshold must be in [0, 1]"),
        ("store.ripple.penalty=-0.1", "store.ripple.penalty must be in [0, 1]"),
        ("store.temporal.anchor=birth", "store.temporal.anchor must be one of created"),
        ("dataset.dependent_update_prob=2", "dependent_update_prob must be in [0, 1]"),
        ("store.weights.relational=nan",
         "store.weights.relational must be a finite number >= 0"),
        ("n_boot=0", "n_boot must be >= 1"),
        ("reembed.n_edits=-1", "reembed.n_edits must be >= 0"),
        ("reembed.overlap=500", "0 <= overlap < window"),
        ("mlflow.experiment=' '", "mlflow.experiment must not be empty"),
    ],
)
def test_more_bad_config_rejected_with_one_line(override: str, message: str) -> None:
    with pytest.raises(runner.ConfigError) as err:
        runner.validate(_cfg("embedder=hashing", override))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_skip_finished_is_the_default() -> None:
    assert _cfg().mlflow.skip_finished is True


# --- interruption ---------------------------------------------------------------------------

_HOLD = """
import sys, time
from pathlib import Path
from experiments.tracking import Tracker, sigterm_as_interrupt
t = Tracker(sys.argv[1], "held", Path(sys.argv[2]))
with sigterm_as_interrupt():
    try:
        with t.run("parent", {"k": "v"}):
            with t.run("child", {"k": "v"}, nested=True):
                print("started", flush=True)
                time.sleep(120)
    except KeyboardInterrupt:
        sys.exit(143)
"""


def _hold(tmp: Path) -> subprocess.Popen:
    proc = _start(["-c", _HOLD, f"sqlite:///{tmp}/mlflow.db", str(tmp / "artifacts")])
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    return proc


def test_sigterm_and_sigkill_leave_no_run_running(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    term = _hold(tmp_path)
    term.send_signal(signal.SIGTERM)
    assert _finish(term, 60).returncode == 143
    statuses = {r.info.run_name: r.info.status for r in _runs(uri, "held")}
    assert statuses == {"parent": "KILLED", "child": "KILLED"}

    killed = _hold(tmp_path)
    killed.kill()  # SIGKILL: nothing runs in the process, its runs stay RUNNING...
    _finish(killed, 60)
    assert sorted(r.info.status for r in _runs(uri, "held")) == \
        ["KILLED", "KILLED", "RUNNING", "RUNNING"]
    # ...until the next tracker opened on the experiment from this host reaps them
    tracker = tracking.Tracker(uri, "held", tmp_path / "artifacts")
    assert len(tracker.reaped) == 2
    runs = _runs(uri, "held")
    assert all(r.info.status == "KILLED" for r in runs)
    assert sum("killed_reason" in r.data.tags for r in runs) == 2
    assert all(r.data.tags["host"] and r.data.tags["pid"] for r in runs)

    # an error inside a run (e.g. the server dying mid-logging) ends it FAILED, not RUNNING
    with pytest.raises(RuntimeError, match="boom"):
        with tracker.run("broken", {}):
            with tracker.run("broken-child", {}, nested=True):
                raise RuntimeError("boom")
    statuses = {r.info.run_name: r.info.status for r in _runs(uri, "held")}
    assert statuses["broken"] == statuses["broken-child"] == "FAILED"


def test_reaping_spares_a_run_finished_just_before_its_process_ended(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race of parallel jobs: another tracker finds run X RUNNING, then X's process
    finishes X and exits before the liveness test; X must stay FINISHED."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    owner = tracking.Tracker(uri, "race", tmp_path / "artifacts")
    with owner.run("stale", {}):
        pass
    stale = _runs(uri, "race")[0].info.run_id
    owner.client.update_run(stale, status="RUNNING")  # left RUNNING by a SIGKILLed process
    with owner.run("x", {}):
        running = owner.run_id

    def gone(pid: int, start: str = "") -> bool:  # every process: x's has exited by now
        return False

    owner.client.update_run(running, status="RUNNING")  # as the other tracker saw it...
    real_search = tracking.Tracker._search

    def search_then_finish(self, query):  # ...then x's process finished x
        found = real_search(self, query)
        owner.client.set_terminated(running, "FINISHED")
        return found

    monkeypatch.setattr(tracking.Tracker, "_search", search_then_finish)
    monkeypatch.setattr(tracking, "process_alive", gone)
    reaper = tracking.Tracker(uri, "race", tmp_path / "artifacts")
    assert reaper.reaped == [stale]
    statuses = {r.info.run_name: r.info.status for r in _runs(uri, "race")}
    assert statuses == {"stale": "KILLED", "x": "FINISHED"}


def test_process_alive_checks_pid_and_start_time() -> None:
    me = os.getpid()
    start = tracking.process_start(me)
    assert tracking.process_alive(me, start)
    assert tracking.process_alive(me, "")
    if start:  # /proc available: a recycled pid (other start time) is not our process
        assert not tracking.process_alive(me, str(int(start) + 1))
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert not tracking.process_alive(proc.pid)


def test_sigterm_mid_run_exits_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _start(_cli(tmp_path, "embedder=hashing", "reembed.n_edits=400",
                       f"hydra.run.dir={out}"))
    deadline = time.time() + 120
    while not (out / "dataset" / "queries.jsonl").exists() and proc.poll() is None:
        assert time.time() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    res = _finish(proc, 120)
    assert res.returncode == 143, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert "interrupted (SIGTERM)" in res.stderr
    assert not (out / "metrics.json").exists()
    assert all(r.info.status != "RUNNING" for r in _runs(f"sqlite:///{tmp_path}/mlflow.db",
                                                           "headline"))


# --- resuming, a dead server and importing ------------------------------------------------


_VOLATILE_TAGS = {"host", "pid", "pid_start", "run_uid", "output_dir"}


def _comparable(run) -> tuple:
    tags = {k: v for k, v in run.data.tags.items()
            if k not in _VOLATILE_TAGS and not k.startswith("mlflow.")}
    metrics = {k: v for k, v in run.data.metrics.items()
               if not k.startswith(("latency_", "ingest_"))}
    params = {k: v for k, v in run.data.params.items()  # where to log differs, by design
              if k not in ("mlflow.tracking_uri", "mlflow.artifact_location")}
    return run.info.run_name, run.info.status, params, tags, metrics, sorted(run.data.metrics)


def test_rerun_skips_and_dead_server_runs_import_identically(tmp_path: Path) -> None:
    live_uri, imported_uri = f"sqlite:///{tmp_path}/live.db", f"sqlite:///{tmp_path}/imp.db"
    args = [*FAST, "study=resume"]
    live = _start(_cli(tmp_path, *args, f"hydra.run.dir={tmp_path}/live", db="live.db"))
    dead = _start(["-m", "experiments.run", *args, "mlflow.tracking_uri=http://127.0.0.1:9",
                   f"mlflow.artifact_location={tmp_path}/artifacts",
                   f"hydra.run.dir={tmp_path}/offline"])
    t0 = time.time()
    res_dead = _finish(dead)
    assert time.time() - t0 < 60  # no minutes of HTTP retries
    res_live = _finish(live)
    assert res_live.returncode == 0, res_live.stderr[-2000:]
    assert res_dead.returncode == 0, res_dead.stderr[-2000:]
    assert "Traceback" not in res_dead.stderr
    hint = [line for line in res_dead.stderr.splitlines() if "experiments.import_runs" in line]
    assert len(hint) == 1 and str(tmp_path / "offline") in hint[0], res_dead.stderr
    assert (tmp_path / "offline" / "metrics.json").exists()
    assert (tmp_path / "offline" / "predictions.csv").exists()

    # the same configuration again: skipped, with the way to force it
    again = _finish(_start(_cli(tmp_path, *args, f"hydra.run.dir={tmp_path}/again",
                                db="live.db")))
    assert again.returncode == 0, again.stderr[-2000:]
    assert "skipped: resume-seed0-" in again.stdout
    assert "force with mlflow.skip_finished=false" in again.stdout
    assert not (tmp_path / "again" / "metrics.json").exists()

    # import the offline run: the same runs as the live one
    imp = _finish(_start(["-m", "experiments.import_runs", str(tmp_path / "offline"),
                          "--tracking-uri", imported_uri]))
    assert imp.returncode == 0, imp.stderr[-2000:]
    assert "imported: " in imp.stdout
    live_runs, imported_runs = _runs(live_uri, "resume"), _runs(imported_uri, "resume")
    (lp,), lc = _family(live_runs)
    (ip,), ic = _family(imported_runs)
    assert len(lc) == len(ic) == 2
    assert _comparable(lp) == _comparable(ip)
    assert sorted(map(_comparable, lc)) == sorted(map(_comparable, ic))
    assert all(r.data.tags["mlflow.parentRunId"] == ip.info.run_id for r in ic)
    assert ip.inputs.dataset_inputs and lp.inputs.dataset_inputs
    import mlflow

    names = {a.path for a in mlflow.MlflowClient(imported_uri).list_artifacts(ip.info.run_id)}
    live_names = {a.path for a in mlflow.MlflowClient(live_uri).list_artifacts(lp.info.run_id)}
    assert names == live_names >= {"metrics.json", "predictions.csv", "config.yaml"}

    # importing twice is harmless; a directory above several runs imports each (the live
    # run is new to this store, the skipped re-run left nothing to import)
    twice = _finish(_start(["-m", "experiments.import_runs", str(tmp_path),
                            "--tracking-uri", imported_uri]))
    assert twice.returncode == 0, twice.stderr[-2000:]
    assert f"skipped: {tmp_path / 'offline'}" in twice.stdout
    assert f"imported: {tmp_path / 'live'}" in twice.stdout
    assert str(tmp_path / "again") not in twice.stdout
    assert len(_runs(imported_uri, "resume")) == 6


# --- concurrency ----------------------------------------------------------------------------


def test_parallel_sweep_into_sqlite_keeps_every_run(tmp_path: Path) -> None:
    res = _finish(_start(_cli(tmp_path, "-m", "hydra/launcher=joblib",
                              "hydra.launcher.n_jobs=4", *FAST, "seed=0,1,2,3", "study=par",
                              f"hydra.sweep.dir={tmp_path}/multirun")))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "not logged" not in res.stderr and "Traceback" not in res.stderr
    parents, children = _family(_runs(f"sqlite:///{tmp_path}/mlflow.db", "par"))
    assert len(parents) == 4 and len(children) == 8
    assert all(r.info.status == "FINISHED" for r in parents + children)
    assert sorted(r.data.params["seed"] for r in parents) == ["0", "1", "2", "3"]
    for p in parents:
        kids = [c for c in children if c.data.tags["mlflow.parentRunId"] == p.info.run_id]
        assert sorted(c.data.params["method"] for c in kids) == ["plain_cosine", "smartvector"]


def test_sqlite_lock_errors_are_retried() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            try:
                raise OSError("(sqlite3.OperationalError) database is locked")
            except OSError as e:
                raise RuntimeError("wrapped by MLflow") from e
        return "ok"

    assert tracking.retry_locked(flaky, first_delay=0.001) == "ok" and len(calls) == 3

    def broken() -> None:
        calls.append(1)
        raise ValueError("something else")

    calls.clear()
    with pytest.raises(ValueError):
        tracking.retry_locked(broken, first_delay=0.001)
    assert len(calls) == 1


def test_sqlite_connections_are_opened_in_wal_mode_and_closed_at_exit(tmp_path: Path) -> None:
    """Every SQLAlchemy engine on SQLite opened after ``wal_sqlite_stores`` commits through a
    write-ahead log without waiting for the disk (``synchronous=NORMAL``, 1), and the
    connections are closed at exit, which removes the log files; a plain sqlite3
    connection (not through SQLAlchemy) keeps SQLite's defaults."""
    script = f"""
import sqlite3
from sqlalchemy import create_engine
from experiments.resilience import exit_now, wal_sqlite_stores
wal_sqlite_stores()
wal_sqlite_stores()  # twice: one hook
engine = create_engine("sqlite:///{tmp_path}/store.db")
with engine.begin() as conn:
    conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    conn.exec_driver_sql("INSERT INTO t VALUES (7)")
with engine.connect() as conn:
    print(conn.exec_driver_sql("PRAGMA journal_mode").scalar(),
          conn.exec_driver_sql("PRAGMA synchronous").scalar(), flush=True)
plain = sqlite3.connect("{tmp_path}/plain.db")
print(plain.execute("PRAGMA journal_mode").fetchone()[0],
      plain.execute("PRAGMA synchronous").fetchone()[0], flush=True)
plain.close()
import os
print(sorted(os.listdir("{tmp_path}")), flush=True)
exit_now(0)
"""
    proc = _finish(_start(["-c", script]), 120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "wal 1"
    assert lines[1] == "delete 2"  # SQLite's defaults: rollback journal, FULL
    assert "store.db-wal" in lines[2]  # the log while the engine is open...
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.db", "store.db"]  # ...gone
    with sqlite3.connect(tmp_path / "store.db") as db:
        assert db.execute("SELECT x FROM t").fetchall() == [(7,)]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
