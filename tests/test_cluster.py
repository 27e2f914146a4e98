"""Beyond one machine (issue 14): an 8-job sweep through the Ray launcher into a real team
server (``mlflow server`` with basic-auth on a real PostgreSQL, both started here), 8 jobs
racing on a fresh SQLite file, the server's authentication, and the UI in a real browser.

The PostgreSQL, Ray and browser tests skip (with the reason) when those are not installed:
``pip install -e ".[dev,cluster]"``, ``apt-get install postgresql chromium`` (as ``.ci/run``).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from experiments.ops import team_server, ui_check
from experiments.ops.resilience import unreachable
from experiments.results import mlflow_export

ROOT = Path(__file__).resolve().parents[1]
FAST = ["embedder=hashing", "methods=[plain_cosine,smartvector]", "reembed.n_edits=0",
        "n_boot=50"]
METHODS = ["plain_cosine", "smartvector"]
SEEDS = list(range(8))
ADMIN = ("admin", "admin-password-for-tests")
ALICE = ("alice", "alice-password-for-tests")
BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "RAY_"))}


def _missing(*modules: str) -> str | None:
    def absent(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is None
        except ModuleNotFoundError:  # its parent package is missing
            return True

    gone = [m for m in modules if absent(m)]
    return f"needs {', '.join(gone)} (pip install -e '.[cluster]')" if gone else None


def _no_postgres() -> str | None:
    try:
        team_server.pg_bindir()
    except team_server.TeamServerError as e:
        return str(e)
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root needs runuser (util-linux) to start PostgreSQL"
    return None


NO_SERVER = _missing("psycopg2", "flask_wtf") or _no_postgres()
NO_RAY = _missing("ray", "hydra_plugins.hydra_ray_launcher")
NO_CHROMIUM = None if any(shutil.which(n) for n in ("chromium", "chromium-browser",
                                                     "google-chrome")) else \
    "needs Debian's chromium (apt-get install chromium)"


def _run(args: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT,
         timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env or BASE_ENV, text=True,
                          capture_output=True, timeout=timeout, check=False)


def _all_runs(client, experiment: str) -> list:
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=1000)


def _check_sweep(runs: list, seeds: list[int]) -> None:
    """Every configuration has one FINISHED run per method with its key metrics."""
    assert [r for r in runs if r.info.status != "FINISHED"] == []  # none RUNNING/FAILED
    got = sorted((int(r.data.params["seed"]), r.data.tags["method"]) for r in runs)
    assert got == sorted((s, m) for s in seeds for m in METHODS)  # none lost or twice
    for r in runs:
        assert set(mlflow_export.KEY_METRICS) <= set(r.data.metrics)


@contextmanager
def _as(user: tuple[str, str] | None) -> Iterator[None]:
    """In this process, MLflow clients send ``user``'s credentials (none if None)."""
    keys = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")
    saved = {k: os.environ.pop(k, None) for k in keys}
    if user:
        os.environ.update(dict(zip(keys, user, strict=True)))
    try:
        yield
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v


# --- servers started for the module ---------------------------------------------------------


@dataclass
class TeamServer:
    url: str
    state: Path
    artifacts: Path

    def env(self, user: tuple[str, str] | None = ALICE, **extra: str) -> dict[str, str]:
        env = {**BASE_ENV, "MLFLOW_TRACKING_URI": self.url, **extra}
        if user:
            env["MLFLOW_TRACKING_USERNAME"], env["MLFLOW_TRACKING_PASSWORD"] = user
        return env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamServer]:
    """``python -m experiments.ops.team_server start`` on a fresh PostgreSQL, stopped at the end."""
    if NO_SERVER:
        pytest.skip(NO_SERVER)
    home = tmp_path_factory.mktemp("team")
    users = home / "users"  # outside the repository, as the team server requires
    users.write_text(f"# admin first\n{ADMIN[0]}:{ADMIN[1]}\n{ALICE[0]}:{ALICE[1]}\n")
    state = home / "state"
    # as root PostgreSQL runs as 'postgres', who cannot enter pytest's private tmp dirs
    pg_data = Path(tempfile.mkdtemp(prefix="smartvector-test-pg-")) / "data"
    pg_data.parent.chmod(0o755)
    port = team_server.free_port()
    t0 = time.time()
    res = _run(["-m", "experiments.ops.team_server", "--state-dir", str(state), "start",
                "--port", str(port), "--pg-data", str(pg_data), "--users", str(users),
                "--experiment", "cluster_sweep", "--experiment", "cluster_auth"], timeout=300)
    started = time.time() - t0
    try:
        assert res.returncode == 0, res.stderr[-3000:]
        assert f"team server: http://127.0.0.1:{port} (basic-auth; store PostgreSQL" in \
            res.stdout
        print(f"team server started in {started:.1f} s")
        yield TeamServer(f"http://127.0.0.1:{port}", state, state / "artifacts")
    finally:
        stop = _run(["-m", "experiments.ops.team_server", "--state-dir", str(state), "stop"])
        info = json.loads((state / "server.json").read_text()) if \
            (state / "server.json").exists() else {}
        shutil.rmtree(pg_data.parent, ignore_errors=True)
        assert stop.returncode == 0, stop.stderr
        assert "server_pid" not in info  # stopped and forgotten
        assert team_server.port_free("127.0.0.1", port)


@pytest.fixture(scope="module")
def ray_sweep(server: TeamServer, tmp_path_factory: pytest.TempPathFactory):
    """The 8-job sweep through ``hydra/launcher=ray_cluster`` on a local Ray, logging to the
    team server as a non-admin user; returns (process result, cwd, seconds)."""
    if NO_RAY:
        pytest.skip(NO_RAY)
    cwd = tmp_path_factory.mktemp("sweep")
    t0 = time.time()
    res = _run(["-m", "experiments.run", "-m", "hydra/launcher=ray_cluster", *FAST,
                "study=cluster_sweep", f"seed={','.join(map(str, SEEDS))}",
                f"hydra.sweep.dir={cwd}/multirun"], env=server.env(), cwd=cwd, timeout=600)
    return res, cwd, time.time() - t0


# --- Ray + team server ------------------------------------------------------------------------


def test_ray_sweep_logs_every_run_to_the_team_server(server: TeamServer, ray_sweep) -> None:
    import mlflow

    res, cwd, seconds = ray_sweep
    print(f"8-job Ray sweep: {seconds:.1f} s")
    assert res.returncode == 0, res.stderr[-4000:]
    assert "Ray Launcher is launching 8 jobs" in res.stdout + res.stderr
    assert "not logged" not in res.stderr and "Traceback" not in res.stderr, res.stderr[-4000:]
    assert ALICE[1] not in res.stdout + res.stderr  # credentials are never printed
    with _as(ADMIN):
        client = mlflow.MlflowClient(server.url)
        runs = _all_runs(client, "cluster_sweep")
        _check_sweep(runs, SEEDS)
        exp = client.get_experiment_by_name("cluster_sweep")
        run = runs[0]
        names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"results.json", "predictions.csv", "reliability.png", "config.yaml"} <= names
    # artifacts went through the server to its destination, not to a local ./mlartifacts
    assert exp.artifact_location.startswith("mlflow-artifacts:")
    assert (server.artifacts / exp.experiment_id / run.info.run_id / "artifacts" /
            "predictions.csv").is_file()
    assert not (cwd / "mlartifacts").exists() and not (cwd / "mlruns").exists()
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    assert {r.data.tags["host"] for r in runs} and all(r.data.tags["pid"] for r in runs)


def test_team_server_refuses_requests_without_credentials(server: TeamServer,
                                                          tmp_path: Path) -> None:
    def status(path: str, user: tuple[str, str] | None) -> int:
        req = urllib.request.Request(server.url + path)
        if user:
            token = base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()
            req.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    search = "/api/2.0/mlflow/experiments/search?max_results=5"
    for path in (search, "/ajax-api/2.0/mlflow/experiments/search?max_results=5",
                 "/api/2.0/mlflow-artifacts/artifacts?path=1", "/"):
        assert status(path, None) == 401, path  # API, UI backend, artifact proxy, UI
    assert status(search, (ALICE[0], "not-alices-password")) == 401
    assert status(search, ALICE) == 200 and status(search, ADMIN) == 200
    assert status("/health", None) == 200  # only the health probe is open

    # the harness: one clear line for missing or wrong credentials, and it logs with them
    artifacts = tmp_path / "unused-artifacts"
    for user, expected in ((None, "no credentials were sent"),
                           ((ALICE[0], "wrong-password-123"), "of user 'alice' was refused")):
        with _as(user):
            opened, reason = mlflow_export.open_experiment(server.url, "cluster_auth",
                                                           artifacts)
        assert opened is None and expected in reason, reason
        assert "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD" in reason
    with _as(ALICE):
        opened, reason = mlflow_export.open_experiment(server.url, "cluster_auth", artifacts)
    assert reason is None and opened is not None
    assert not artifacts.exists()  # a server's experiments keep artifacts on the server

    # a run with a wrong password still finishes, says why in one line and how to import
    env = server.env((ALICE[0], "wrong-password-123"))
    res = _run(["-m", "experiments.run", *FAST, "study=cluster_auth",
                f"results_root={tmp_path}/run"], env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    warned = [ln for ln in res.stderr.splitlines() if ln.startswith("warning: ")]
    assert any("password of user 'alice' was refused" in w for w in warned), res.stderr
    assert "Traceback" not in res.stderr
    imp = _run(["-m", "experiments.results.import_runs", str(tmp_path / "run")], env=server.env(),
               cwd=tmp_path)
    assert imp.returncode == 0, imp.stderr[-3000:]
    import mlflow

    with _as(ALICE):
        runs = _all_runs(mlflow.MlflowClient(server.url), "cluster_auth")
    assert sorted(r.data.tags["method"] for r in runs) == METHODS
    assert all(r.info.status == "FINISHED" for r in runs)


def test_team_server_start_errors_are_one_line(server: TeamServer, tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("admin:short\n")
    inside = ROOT / ".pytest-users-do-not-commit"
    port = server.url.rsplit(":", 1)[1]
    good = tmp_path / "good-users"
    good.write_text(f"{ADMIN[0]}:{ADMIN[1]}\n")
    cases = {
        "short password": (["--users", str(users)], "password of user 'admin' is too short"),
        "no credentials": ([], "a team server needs credentials"),
        "open without auth": (["--no-auth", "--host", "0.0.0.0"],
                              "refusing to serve on 0.0.0.0 without authentication"),
        "port in use": (["--users", str(good), "--port", port], f"port {port} on 127.0.0.1 "
                                                                "is in use"),
        "credentials in the repo": (["--users", str(inside)], "is inside the repository"),
    }
    for name, (args, expected) in cases.items():
        res = _run(["-m", "experiments.ops.team_server", "--state-dir", str(tmp_path / name),
                    "start", *args], env=BASE_ENV)
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1, (name, res.stderr)
        assert lines[0].startswith("error: ") and expected in lines[0], (name, lines)
    status = _run(["-m", "experiments.ops.team_server", "--state-dir", str(server.state),
                   "status"])
    assert status.returncode == 0 and f"mlflow server: {server.url} up" in status.stdout


# --- the browser ------------------------------------------------------------------------------


@pytest.mark.skipif(NO_CHROMIUM is not None, reason=str(NO_CHROMIUM))
def test_ui_opens_on_the_method_comparison(server: TeamServer, ray_sweep,
                                           tmp_path: Path) -> None:
    assert ray_sweep[0].returncode == 0
    shot = tmp_path / "ui.png"
    with _as(ALICE):
        missing = ui_check.check(server.url, "cluster_sweep", screenshot=shot)
    assert missing == []
    assert shot.stat().st_size > 10_000
    # the command line says the same
    res = _run(["-m", "experiments.ops.ui_check", "--experiment", "cluster_sweep"],
               env=server.env(ALICE))
    assert res.returncode == 0 and res.stdout.startswith("ok: "), res.stderr


def test_ui_check_reports_what_the_page_lacks() -> None:
    expected = ui_check.Expected("1", METHODS, {"top1_accuracy": [0.1234, 0.5],
                                                "ece": [0.25, 0.375]})
    overview = "raytest Overview Traces 0 No data available for the selected time range"
    assert ui_check.missing_on_page(overview, expected) == [
        "the runs (the page shows the GenAI overview)", "the run of plain_cosine",
        "the run of smartvector", "the chart of top1_accuracy", "the chart of ece"]
    charts = ("Run Name plain_cosine smartvector top1_accuracy 0.12 0.50 ece 0.25 0.3")
    assert ui_check.missing_on_page(charts, expected) == ["1 of 2 values of ece"]
    assert ui_check.missing_on_page(charts.replace("0.3", "0.38"), expected) == []
    many = ui_check.Expected("1", [f"m{i}" for i in range(11)], {"ece": [0.25]})
    page = "Run Name " + " ".join(f"m{i}" for i in range(10)) + " ece 0.25"
    assert ui_check.missing_on_page(page, many) == [
        "the run of m10", "(MLflow's chart view draws the first 10 runs; this configuration "
        "has 11)"]


# --- a fresh SQLite file --------------------------------------------------------------------


def test_eight_parallel_jobs_on_a_fresh_sqlite_file_lose_none(tmp_path: Path) -> None:
    """8 jobs started at once on a database that does not exist yet: each creates the schema
    and the experiment on first use (plain MLflow loses runs here; the harness serialises
    the first use and retries locked writes)."""
    import mlflow

    db = tmp_path / "fresh" / "mlflow.db"
    uri = f"sqlite:///{db}"
    env = {**BASE_ENV, "MLFLOW_TRACKING_URI": uri}
    t0 = time.time()
    procs = [subprocess.Popen([sys.executable, "-m", "experiments.run", *FAST,
                               "study=fresh_sqlite", f"seed={seed}",
                               f"results_root={tmp_path}/out"],
                              cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for seed in SEEDS]
    results = [p.communicate(timeout=600) for p in procs]
    print(f"8 parallel jobs on a fresh SQLite file: {time.time() - t0:.1f} s")
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err[-3000:]
        assert "not logged" not in err and "Traceback" not in err, err[-3000:]
    assert not db.with_name("mlflow.db-journal").exists()
    _check_sweep(_all_runs(mlflow.MlflowClient(uri), "fresh_sqlite"), SEEDS)
    if NO_CHROMIUM is None:  # the README's local case: the UI of a SQLite store
        missing = ui_check.check(uri, "fresh_sqlite", screenshot=tmp_path / "ui.png")
        assert missing == []


# --- configuration and helpers ----------------------------------------------------------------


def _launcher(name: str, **env: str):
    from experiments.config import register

    register()  # the structured configs behind conf/ (as experiments.run does on import)
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            cfg = compose(config_name="config", overrides=[f"hydra/launcher={name}"],
                          return_hydra_config=True)
            from omegaconf import OmegaConf

            return OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


@pytest.mark.skipif(NO_RAY is not None, reason=str(NO_RAY))
def test_ray_preset_joins_a_cluster_by_address_and_forwards_the_uri() -> None:
    cfg = _launcher("ray_cluster", MLFLOW_TRACKING_URI="http://mlflow.lab:5000",
                    MLFLOW_TRACKING_PASSWORD="secret-value")
    init = cfg["ray"]["init"]
    assert cfg["_target_"].endswith("RayLauncher")
    assert init["address"] is None  # a local Ray, or $RAY_ADDRESS
    # an existing cluster refuses object_store_memory; the plugin would set 75 MB otherwise
    assert "object_store_memory" in init and init["object_store_memory"] is None
    assert init["runtime_env"]["env_vars"] == {"MLFLOW_TRACKING_URI": "http://mlflow.lab:5000"}
    assert "secret-value" not in json.dumps(cfg)


@pytest.mark.skipif(_missing("submitit", "hydra_plugins.hydra_submitit_launcher") is not None,
                    reason="needs the [cluster] extra")
def test_slurm_preset() -> None:
    cfg = _launcher("slurm")
    assert cfg["_target_"].endswith("SlurmLauncher")
    assert cfg["cpus_per_task"] == 2 and cfg["timeout_min"] == 60


def test_uris_and_artifact_locations(tmp_path: Path) -> None:
    have_psycopg3 = importlib.util.find_spec("psycopg") is not None
    have_psycopg2 = importlib.util.find_spec("psycopg2") is not None
    pg = mlflow_export.with_pg_driver("postgresql://u:p@db/mlflow")
    if have_psycopg2 and not have_psycopg3:
        assert pg == "postgresql+psycopg2://u:p@db/mlflow"
    assert mlflow_export.with_pg_driver("postgresql+psycopg2://u:p@db/x").endswith("@db/x")
    assert mlflow_export.with_pg_driver("sqlite:///x.db") == "sqlite:///x.db"
    loc = mlflow_export.artifact_location_for
    assert loc("sqlite:////data/team/mlflow.db", "mlartifacts", tmp_path) == \
        Path("/data/team/mlartifacts")
    assert loc("sqlite:////data/team/mlflow.db", None, tmp_path) == \
        Path("/data/team/mlartifacts")
    assert loc("sqlite:////data/team/mlflow.db", "/abs/art", tmp_path) == Path("/abs/art")
    assert loc("http://server:5000", "mlartifacts", tmp_path) == tmp_path / "mlartifacts"
    assert mlflow_export.is_server_uri("https://x")
    assert not mlflow_export.is_server_uri("sqlite:///x")
    assert team_server.mask("postgresql+psycopg2://mlflow:s3cret@127.0.0.1:5/db") == \
        "postgresql+psycopg2://mlflow:***@127.0.0.1:5/db"
    assert unreachable("postgresql+psycopg2://u:p@127.0.0.1:9/db").startswith(
        "cannot reach the postgresql database at 127.0.0.1:9")


def test_logged_metrics_and_the_ui_link() -> None:
    quality = {"top1_accuracy": 0.5, "stale_rate": 0.1, "contradicted_rate": 0.0, "ece": 0.2,
               "recall_at_5": 0.9, "brier": 0.3, "top1_accuracy_ci_lo": 0.4}
    assert mlflow_export.metric_names(quality, {"latency_p50_ms": 1.5}) == {
        "top1_accuracy": 0.5, "stale_rate": 0.1, "contradicted_rate": 0.0, "ece": 0.2,
        "recall_at_5": 0.9, "latency_p50_ms": 1.5}
    url = mlflow_export.ui_url("http://h:5000/", "7", "abc")
    assert url == ("http://h:5000/#/experiments/7/runs?compareRunsMode=CHART&searchFilter="
                   "tags.results_uid%20%3D%20%27abc%27")
