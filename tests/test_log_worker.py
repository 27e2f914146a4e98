"""A single run's MLflow work in a child process (experiments.log_worker): the same runs as
in-process logging, the "already finished" answer, an unusable store, a child that dies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

from experiments.log_worker import BackgroundLogger

ROOT = Path(__file__).resolve().parents[1]
FAST = ["embedder=hashing", "methods=[plain_cosine,smartvector]", "reembed.n_edits=10",
        "n_boot=100", "study=bg"]
ENV = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
_VOLATILE = {"host", "pid", "pid_start", "run_uid", "output_dir"}


def _run(tmp: Path, name: str, *extra: str) -> tuple[subprocess.CompletedProcess, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "experiments.run", *FAST, *extra,
         f"mlflow.tracking_uri=sqlite:///{tmp}/{name}.db",
         f"mlflow.artifact_location={tmp}/{name}-artifacts", f"hydra.run.dir={tmp}/{name}"],
        cwd=ROOT, env=ENV, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


def _family(uri: str) -> tuple[object, list]:
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name("bg")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1
    return parents[0], [r for r in runs if "mlflow.parentRunId" in r.data.tags]


def _comparable(run) -> tuple:
    tags = {k: v for k, v in run.data.tags.items()
            if k not in _VOLATILE and not k.startswith("mlflow.")}
    params = {k: v for k, v in run.data.params.items()
              if k not in ("mlflow.tracking_uri", "mlflow.artifact_location",
                           "mlflow.background")}
    metrics = {k: v for k, v in run.data.metrics.items()
               if not k.startswith(("latency_", "ingest_"))}
    return run.info.run_name, run.info.status, params, tags, metrics


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("bg")
    got = {}
    for name, flag in (("child", "true"), ("inproc", "false")):
        res, pid = _run(tmp, name, f"mlflow.background={flag}")
        assert res.returncode == 0, res.stderr[-2000:]
        assert "outputs: " in res.stdout and "Traceback" not in res.stderr
        got[name] = (f"sqlite:///{tmp}/{name}.db", pid)
    return tmp, got


def test_the_child_logs_the_same_runs_as_the_run_itself(both) -> None:
    tmp, got = both
    (cp, cc), (ip, ic) = (_family(got[n][0]) for n in ("child", "inproc"))
    assert _comparable(cp) == _comparable(ip)
    assert sorted(map(_comparable, cc)) == sorted(map(_comparable, ic))
    assert len(cc) == 2 and all(r.data.tags["mlflow.parentRunId"] == cp.info.run_id for r in cc)
    # the child drew the plot before logging it: both runs carry the same files
    names = {n: {a.path for a in mlflow.MlflowClient(got[n][0]).list_artifacts(r.info.run_id)}
             for n, r in (("child", cp), ("inproc", ip))}
    assert names["child"] == names["inproc"] >= {"reliability.png", "metrics.json"}
    assert (tmp / "child" / "reliability.png").stat().st_size > 10_000
    # MLflow's source is the command in both cases
    assert cp.data.tags["mlflow.source.name"] == ip.data.tags["mlflow.source.name"]
    assert cp.data.tags["mlflow.source.name"].endswith("run.py")
    # who logged: another process for background logging, the run's own otherwise
    assert cp.data.tags["pid"] != str(got["child"][1])
    assert ip.data.tags["pid"] == str(got["inproc"][1])


def test_the_child_answers_finished_ready_and_offline(both, tmp_path) -> None:
    tmp, got = both
    uri = got["child"][0]
    parent, _ = _family(uri)
    fp = parent.data.tags["config_fingerprint"]
    with BackgroundLogger(uri, "bg", tmp / "child-artifacts", fp, True) as logger:
        assert logger.status() == {"state": "finished", "run_id": parent.info.run_id}
    with BackgroundLogger(uri, "bg", tmp / "child-artifacts", fp, False) as logger:
        assert logger.status() == {"state": "ready", "reaped": []}
    # closed without an output directory: nothing was logged
    assert len(_family(uri)[1]) == 2
    dead = "http://127.0.0.1:9"
    with BackgroundLogger(dead, "bg", tmp_path, fp, True) as logger:
        status = logger.status()
    assert status["state"] == "offline" and "127.0.0.1:9" in status["reason"]
    assert logger._proc.returncode == 0


def test_a_child_that_dies_is_reported_not_fatal(both, tmp_path) -> None:
    tmp, _ = both
    uri = f"sqlite:///{tmp_path}/fresh.db"
    with BackgroundLogger(uri, "bg", tmp_path / "a", "f" * 64, True) as logger:
        assert logger.status()["state"] == "ready"
        logger._proc.kill()
        logger._proc.wait()
        answer = logger.log(tmp / "child", None)
    assert answer["state"] == "offline"
    assert answer["reason"].startswith("the MLflow logging process ended unexpectedly")


def test_a_child_that_cannot_log_says_why(both, tmp_path) -> None:
    tmp, _ = both
    uri = f"sqlite:///{tmp_path}/fresh.db"
    with BackgroundLogger(uri, "bg", tmp_path / "a", "f" * 64, True) as logger:
        assert logger.status()["state"] == "ready"
        answer = logger.log(tmp_path / "nowhere", None)
    assert answer["state"] == "failed"
    assert "no mlflow_run.json" in answer["reason"] and uri in answer["reason"]
    assert "\n" not in answer["reason"]
    assert json.loads(json.dumps(answer)) == answer


def test_the_plot_is_drawn_in_a_child_beside_the_logging(both, tmp_path) -> None:
    import shutil

    import matplotlib.figure  # noqa: F401 - as in the logging process, before the fork

    from experiments.log_worker import _Drawing

    tmp, _ = both
    out = tmp_path / "out"
    shutil.copytree(tmp / "child", out)
    (out / "reliability.png").unlink()
    drawing = _Drawing(out, "a title")
    assert drawing._pid is not None and drawing._pid != os.getpid()  # this process goes on
    drawing.wait()
    assert drawing._pid is None and (out / "reliability.png").stat().st_size > 10_000
    drawing.wait()  # waiting again is a no-op


def test_a_plot_that_cannot_be_drawn_is_a_warning_not_a_lost_run(both, tmp_path,
                                                                 capfd) -> None:
    import shutil

    tmp, _ = both
    out = tmp_path / "out"
    shutil.copytree(tmp / "child", out)
    (out / "reliability.png").unlink()
    (out / "predictions.csv").write_text("nothing\n1\n")
    uri = f"sqlite:///{tmp_path}/fresh.db"
    with BackgroundLogger(uri, "bg", tmp_path / "a", "f" * 64, True) as logger:
        assert logger.status()["state"] == "ready"
        answer = logger.log(out, None, plot="a title")
    assert answer["state"] == "logged"
    assert "warning: no reliability plot: " in capfd.readouterr().err
    client = mlflow.MlflowClient(uri)
    files = {a.path for a in client.list_artifacts(answer["run_id"])}
    assert "metrics.json" in files and "reliability.png" not in files
    assert client.get_run(answer["run_id"]).info.status == "FINISHED"
