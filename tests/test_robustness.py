"""Bad input, interruption and concurrency, mostly through the command line: one-line errors
without tracebacks, no MLflow run left RUNNING after SIGTERM or SIGKILL, no process left
behind, re-runs that skip finished configurations, a dead tracking server with a later
import, valid datasets that reach MLflow, and a parallel sweep into one SQLite store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from experiments.config import register
from experiments.ops import resilience
from experiments.results import mlflow_export
from experiments.results.mlflow_export import Experiment, process_tags
from experiments.results.record import find_results_dirs, read_results
from experiments.settings import ConfigError, validate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "datasets" / "example"
FAST = ["embedder=hashing", "methods=[plain_cosine,smartvector]", "reembed.n_edits=10",
        "n_boot=100"]
ENV = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}


def _cfg(*overrides: str):
    register()  # the structured schemas the configs name
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return compose(config_name="config", overrides=list(overrides))


def _start(args: list[str], cwd: Path = ROOT) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], cwd=cwd, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(proc: subprocess.Popen, timeout: float = 300) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _cli(tmp: Path, *args: str, db: str = "mlflow.db", out: str = "out") -> list[str]:
    return ["-m", "experiments.run", *args, f"mlflow.tracking_uri=sqlite:///{tmp}/{db}",
            f"results_root={tmp}/{out}"]


def _runs(uri: str, experiment: str) -> list:
    import mlflow

    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=1000)




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
        args = _cli(tmp_path / name, *FAST, "dataset=jsonl", f"dataset.path={path}")
        jobs[name] = (_start(args), "error: " + expected, 2)
    bad_config = {  # rejected at start-up, before any work
        "n_boot": ("n_boot=0", "error: n_boot must be >= 1, got 0", 2),
        "half_life": ("store.temporal.half_life_days=0",
                      "error: store.temporal.half_life_days must be > 0", 2),
        "seed": ("seed=-1", "error: seed must be >= 0, got -1", 2),
    }
    for name, (override, expected, code) in bad_config.items():
        args = _cli(tmp_path / name, *FAST, override)
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
        # nothing was tracked or written: no store, no results directory
        assert not list(tmp_path.glob(f"{name}/*.db")), name
        assert not (tmp_path / name / "out").exists(), name


def test_unanswerable_query_is_reported_and_excluded(tmp_path: Path) -> None:
    c, q = _example()
    path = _write(tmp_path / "data", c, [*q, {**q[0], "id": "q9", "answer": "999 parsecs"}])
    res = _finish(_start(["-m", "experiments.run", *FAST, "dataset=jsonl",
                          f"dataset.path={path}", "mlflow.enabled=false",
                          f"results_root={tmp_path}/out"]))
    assert res.returncode == 0, res.stderr[-2000:]
    warned = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
    assert any("excluded 1 of 3 queries" in w and "q9" in w for w in warned), res.stderr
    (out,) = find_results_dirs([tmp_path / "out"])
    assert read_results(out).corpus.queries == 2


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
    with pytest.raises(ConfigError) as err:
        validate(_cfg("embedder=hashing", override), ROOT)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_skip_finished_is_the_default() -> None:
    assert _cfg().mlflow.skip_finished is True


# --- valid but unusual datasets ---------------------------------------------------------


def test_valid_datasets_reach_mlflow(tmp_path: Path) -> None:
    """``source_type`` is optional and a byte-order mark is tolerated: such datasets run and
    are logged (the dataset input comes from the validated dataset, not a second parse); a
    version number near the top of its range runs too."""
    c, q = _example()
    plain = [{k: v for k, v in d.items() if k != "source_type"} for d in c]
    cases = {"no_source_type": _write(tmp_path / "a", plain, q),
             "bom": _write(tmp_path / "b", c, q),
             "huge_version": _write(tmp_path / "c", [{**d, "version": d["version"] + 2**31 - 10}
                                                     for d in c], q)}
    corpus = tmp_path / "b" / "corpus.jsonl"
    corpus.write_bytes(b"\xef\xbb\xbf" + corpus.read_bytes())
    jobs = {name: _start(_cli(tmp_path, *FAST, "dataset=jsonl", f"dataset.path={path}",
                              f"study={name}"))
            for name, path in cases.items()}
    for name, proc in jobs.items():
        res = _finish(proc)
        assert res.returncode == 0, (name, res.stderr[-2000:])
        assert "not logged" not in res.stderr and "Traceback" not in res.stderr, name
        runs = _runs(f"sqlite:///{tmp_path}/mlflow.db", name)
        assert sorted(r.info.status for r in runs) == ["FINISHED", "FINISHED"], name
        assert all(r.inputs.dataset_inputs for r in runs), name


# --- interruption ---------------------------------------------------------------------------

_HOLD = """
import sys, time
from pathlib import Path
from experiments.results.mlflow_export import Experiment, process_tags
e = Experiment(sys.argv[1], "held", Path(sys.argv[2]))
for name in ("a", "b"):
    e.client.create_run(e.id, tags=process_tags(), run_name=name)
print("started", flush=True)
time.sleep(120)
"""


def _hold(tmp: Path) -> subprocess.Popen:
    proc = _start(["-c", _HOLD, f"sqlite:///{tmp}/mlflow.db", str(tmp / "artifacts")])
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    return proc


def test_runs_of_a_killed_process_are_reaped(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    killed = _hold(tmp_path)
    killed.kill()  # SIGKILL: nothing runs in the process, its runs stay RUNNING...
    _finish(killed, 60)
    assert sorted(r.info.status for r in _runs(uri, "held")) == ["RUNNING", "RUNNING"]
    # ...until the next experiment opened from this host reaps them
    experiment = Experiment(uri, "held", tmp_path / "artifacts")
    assert len(experiment.reaped) == 2
    runs = _runs(uri, "held")
    assert all(r.info.status == "KILLED" for r in runs)
    assert all("killed_reason" in r.data.tags and r.data.tags["pid"] for r in runs)


def test_reaping_spares_a_run_finished_just_before_its_process_ended(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race of parallel jobs: one process finds run X RUNNING, then X's process
    finishes X and exits before the liveness test; X must stay FINISHED."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    owner = Experiment(uri, "race", tmp_path / "artifacts")
    stale = owner.client.create_run(owner.id, tags=process_tags(), run_name="stale")
    x = owner.client.create_run(owner.id, tags=process_tags(), run_name="x").info.run_id
    real_search = Experiment.search

    def search_then_finish(self, query, max_results=1000):  # x's process finished x
        found = real_search(self, query, max_results)
        owner.client.set_terminated(x, "FINISHED")
        return found

    monkeypatch.setattr(Experiment, "search", search_then_finish)
    monkeypatch.setattr(mlflow_export, "process_alive", lambda pid, start="": False)
    reaper = Experiment(uri, "race", tmp_path / "artifacts")
    assert reaper.reaped == [stale.info.run_id]
    statuses = {r.info.run_name: r.info.status for r in _runs(uri, "race")}
    assert statuses == {"stale": "KILLED", "x": "FINISHED"}


def test_process_alive_checks_pid_and_start_time() -> None:
    me = os.getpid()
    start = resilience.process_start(me)
    assert resilience.process_alive(me, start)
    assert resilience.process_alive(me, "")
    if start:  # /proc available: a recycled pid (other start time) is not our process
        assert not resilience.process_alive(me, str(int(start) + 1))
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    if start:  # ended, not yet reaped (a zombie): not running
        while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z":
            time.sleep(0.01)
        assert not resilience.process_alive(proc.pid)
    proc.wait()
    assert not resilience.process_alive(proc.pid)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _wait_for_dataset(tmp: Path, proc: subprocess.Popen) -> None:
    deadline = time.time() + 120
    while not list((tmp / "out").glob("*/*/dataset/queries.jsonl")) and proc.poll() is None:
        assert time.time() < deadline
        time.sleep(0.02)


def test_sigterm_mid_run_exits_cleanly(tmp_path: Path) -> None:
    proc = _start(_cli(tmp_path, "embedder=hashing", "reembed.n_edits=400"))
    _wait_for_dataset(tmp_path, proc)
    proc.send_signal(signal.SIGTERM)
    res = _finish(proc, 120)
    assert res.returncode == 143, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert "interrupted (SIGTERM)" in res.stderr
    assert not find_results_dirs([tmp_path / "out"])  # nothing half-finished looks finished
    assert all(r.info.status != "RUNNING" for r in _runs(f"sqlite:///{tmp_path}/mlflow.db",
                                                           "headline"))


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_a_run_starts_no_process_so_kill_9_leaves_none(tmp_path: Path) -> None:
    proc = _start(_cli(tmp_path, "embedder=hashing", "reembed.n_edits=400"))
    _wait_for_dataset(tmp_path, proc)
    assert _children(proc.pid) == []  # (evaluating: one process)
    proc.kill()
    _finish(proc, 60)
    again = _finish(_start(_cli(tmp_path, "embedder=hashing", "reembed.n_edits=10")), 300)
    assert again.returncode == 0, again.stderr[-2000:]  # the claim died with its process


def _spawned_workers(pid: int) -> list[int]:
    return [c for c in _children(pid)
            if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_kill_9_of_the_paper_command_takes_its_workers_with_it(tmp_path: Path) -> None:
    """The reproduction's pool workers (the user asked for them) die with their parent, even
    mid-job; before, a killed reproduction left both waiting on their queue for ever."""
    (tmp_path / "datasets").symlink_to(ROOT / "datasets")
    proc = subprocess.Popen(
        [sys.executable, "-m", "experiments.studies.paper", "--embedder", "hashing",
         "--only", "robustness", "--jobs", "2", "--tracking-uri",
         f"sqlite:///{tmp_path}/mlflow.db", "--results-root", str(tmp_path / "out")],
        cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 180
    while len(workers := _spawned_workers(proc.pid)) < 2:
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    deadline = time.time() + 10
    while any(resilience.process_alive(w) for w in workers) and time.time() < deadline:
        time.sleep(0.1)
    left = [w for w in workers if resilience.process_alive(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert left == []


# --- resuming, a dead server and importing ------------------------------------------------


_VOLATILE_TAGS = {"host", "pid", "pid_start", "results_dir", "results_uid"}


def _comparable(run) -> tuple:
    tags = {k: v for k, v in run.data.tags.items()
            if k not in _VOLATILE_TAGS and not k.startswith("mlflow.")}
    metrics = {k: v for k, v in run.data.metrics.items() if not k.startswith("latency_")}
    params = {k: v for k, v in run.data.params.items()  # where to log differs, by design
              if k not in ("mlflow.tracking_uri", "results_root")}
    return run.info.run_name, run.info.status, params, tags, metrics, sorted(run.data.metrics)


def test_rerun_skips_and_dead_server_runs_import_identically(tmp_path: Path) -> None:
    live_uri, imported_uri = f"sqlite:///{tmp_path}/live.db", f"sqlite:///{tmp_path}/imp.db"
    args = [*FAST, "study=resume"]
    live = _start(_cli(tmp_path, *args, db="live.db", out="live"))
    dead = _start(["-m", "experiments.run", *args, "mlflow.tracking_uri=http://127.0.0.1:9",
                   f"results_root={tmp_path}/offline"])
    t0 = time.time()
    res_dead = _finish(dead)
    assert time.time() - t0 < 60  # no minutes of HTTP retries
    res_live = _finish(live)
    assert res_live.returncode == 0, res_live.stderr[-2000:]
    assert res_dead.returncode == 0, res_dead.stderr[-2000:]
    assert "Traceback" not in res_dead.stderr
    (offline,) = find_results_dirs([tmp_path / "offline"])
    hint = [line for line in res_dead.stderr.splitlines()
            if "experiments.results.import_runs" in line]
    assert len(hint) == 1 and str(offline) in hint[0], res_dead.stderr
    assert (offline / "predictions.csv").exists()

    # the same configuration again: skipped, with the way to force it
    again = _finish(_start(_cli(tmp_path, *args, db="live.db", out="live")))
    assert again.returncode == 0, again.stderr[-2000:]
    assert "skipped: resume-seed0-" in again.stdout
    assert "force with mlflow.skip_finished=false" in again.stdout
    assert len(_runs(live_uri, "resume")) == 2

    # import the offline run into another store: the same runs as the live one, its
    # artifacts beside that store (not in the current directory)
    imp = _finish(_start(["-m", "experiments.results.import_runs", str(tmp_path / "offline"),
                          "--tracking-uri", imported_uri], cwd=tmp_path))
    assert imp.returncode == 0, imp.stderr[-2000:]
    assert "imported: " in imp.stdout
    live_runs, imported_runs = _runs(live_uri, "resume"), _runs(imported_uri, "resume")
    assert len(live_runs) == len(imported_runs) == 2
    assert sorted(map(_comparable, live_runs), key=str) == \
        sorted(map(_comparable, imported_runs), key=str)
    assert all(r.inputs.dataset_inputs for r in imported_runs)
    import mlflow

    for r in imported_runs:
        assert r.info.artifact_uri.startswith((tmp_path / "mlartifacts").as_uri())
        names = {a.path for a in mlflow.MlflowClient(imported_uri).list_artifacts(
            r.info.run_id)}
        assert names >= {"results.json", "predictions.csv", "config.yaml", "run.csv"}

    # importing twice is harmless; a directory above several imports each
    twice = _finish(_start(["-m", "experiments.results.import_runs", str(tmp_path),
                            "--tracking-uri", imported_uri]))
    assert twice.returncode == 0, twice.stderr[-2000:]
    assert f"skipped: {offline}" in twice.stdout
    assert "imported: " in twice.stdout and str(tmp_path / "live") in twice.stdout
    assert len(_runs(imported_uri, "resume")) == 4


# --- concurrency ----------------------------------------------------------------------------


def test_parallel_sweep_into_sqlite_keeps_every_run(tmp_path: Path) -> None:
    res = _finish(_start(_cli(tmp_path, "-m", "hydra/launcher=joblib",
                              "hydra.launcher.n_jobs=4", *FAST, "seed=0,1,2,3", "study=par",
                              f"hydra.sweep.dir={tmp_path}/multirun")))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "not logged" not in res.stderr and "Traceback" not in res.stderr
    runs = _runs(f"sqlite:///{tmp_path}/mlflow.db", "par")
    assert len(runs) == 8 and all(r.info.status == "FINISHED" for r in runs)
    by_seed: dict[str, list[str]] = {}
    for r in runs:
        by_seed.setdefault(r.data.params["seed"], []).append(r.data.params["method"])
    assert {k: sorted(v) for k, v in by_seed.items()} == {
        s: ["plain_cosine", "smartvector"] for s in ("0", "1", "2", "3")}


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

    assert resilience.retry_locked(flaky, first_delay=0.001) == "ok" and len(calls) == 3

    def broken() -> None:
        calls.append(1)
        raise ValueError("something else")

    calls.clear()
    with pytest.raises(ValueError):
        resilience.retry_locked(broken, first_delay=0.001)
    assert len(calls) == 1
