"""The paper's studies made cheaper without moving a result (issue 15, row "studies"):
Qdrant's id pre-filter selects exactly the payload filter's points (and its archive of
closed windows changes no ranking), the per-run reliability
plot is a switch outside the configuration fingerprint, finished configurations are found
with one search (a whole study is skipped when all of them are), and Hydra's sweeper composes
one job up front instead of all."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

import experiments.run as runner
from experiments import paper, tracking
from experiments.replay import replay, run_rows
from experiments.retrievers import Context, make_retriever

ROOT = Path(__file__).resolve().parents[1]
FAST = ["embedder=hashing", "reembed.n_edits=0", "n_boot=50"]


def _cfg(*overrides: str):
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return compose(config_name="config", overrides=list(overrides))


def _setup(tmp_path: Path, *overrides: str):
    cfg = _cfg(*FAST, *overrides)
    settings = runner.validate(cfg)
    ds = runner.load_data(cfg, tmp_path)
    emb = runner.shared_embedder("hashing", None)
    qvecs = dict(zip([q.id for q in ds.queries], emb.encode([q.text for q in ds.queries]),
                     strict=True))
    return cfg, settings, ds, Context(emb, settings.store, cfg.protocol.index), qvecs


@pytest.mark.parametrize(("validity", "mode"), [(True, "replay"), (False, "replay"),
                                               (True, "time_travel")])
def test_qdrant_id_prefilter_selects_the_payload_filters_points(tmp_path: Path,
                                                                validity: bool,
                                                                mode: str) -> None:
    pytest.importorskip("qdrant_client", reason="qdrant_filter needs qdrant-client")
    cfg, settings, ds, ctx, qvecs = _setup(tmp_path, "dataset.contradiction_rate=0.5",
                                           "dataset.supersession=documents",
                                           "dataset.validity_windows=true")
    node = {"kind": "qdrant_filter", "validity": validity}
    checked, searched, branches = [], [], set()
    real = make_retriever("qdrant_filter", node, ctx)
    original_search = type(real).search

    def scroll(self, collection, flt):
        points, _ = self.client.scroll(collection, scroll_filter=flt, limit=100_000,
                                       with_payload=False)
        return sorted(int(p.id) for p in points)

    def search_and_compare(self, query, at, k, gold=None):
        # the points the payload filter selects, as Qdrant evaluates it, in both collections
        # (a scroll: it computes no score, so the collections' state is left as the replay
        # leaves them)
        by_payload = {c: scroll(self, c, self.payload_filter(at))
                      for c in (self.COLLECTION, self.ARCHIVE)}
        assert sorted(sum(by_payload.values(), [])) == self.matching_rows(at)
        # the query searches exactly the collections holding such points, and the id filter
        # it runs in each (none / must have a kept id / must_not have a left-out one,
        # whichever names fewer) selects those same points there
        flts = self.query_filters(at)
        assert set(flts) == {c for c, rows in by_payload.items() if rows}
        for c, flt in flts.items():
            assert scroll(self, c, flt) == by_payload[c]
            branches.add("none" if flt is None else "must" if flt.must else "must_not")
        checked.append(len(self.matching_rows(at)))
        searched.append(tuple(flts))
        return original_search(self, query, at, k, gold)

    type(real).search, saved = search_and_compare, type(real).search
    try:
        res = replay(ds, real, qvecs, k=5, schedule=settings.schedule, seed=cfg.seed,
                     mode=mode)
    finally:
        type(real).search = saved
    assert len(checked) == len(ds.queries) and len(res.run) == len(ds.queries)
    assert max(checked) > 0
    assert any(real.archived) == validity  # closed windows went to the archive
    if validity:  # the filter matters: some chunks were out of force at some query
        assert min(checked) < real.size
    if mode == "replay":  # asked after every ingestion so far: the archive is never searched
        assert all(s == (real.COLLECTION,) for s in searched if s)
    else:  # "as of" the query's time, after the whole corpus: the archive too, and
        # chunks ingested after that time are left out of both
        assert any(real.ARCHIVE in s for s in searched)
        assert branches == {"none", "must", "must_not"}


def test_reliability_plot_is_a_switch_outside_the_fingerprint(tmp_path: Path) -> None:
    outs = {}
    for flag in ("true", "false"):
        cfg, settings, *_ = _setup(tmp_path, "methods=[plain_cosine,smartvector]",
                                   f"plots.reliability={flag}")
        out = tmp_path / flag
        out.mkdir()
        metrics = runner.evaluate_run(cfg, settings, out)
        outs[flag] = (out, metrics, runner.config_fingerprint(cfg, None))
    (on, m_on, fp_on), (off, m_off, fp_off) = outs["true"], outs["false"]
    assert (on / "reliability.png").is_file() and not (off / "reliability.png").exists()
    assert fp_on == fp_off  # a finished run is recognised whatever the switch says
    for name in ("predictions.csv", "run.csv"):
        assert (on / name).read_bytes() == (off / name).read_bytes()
    for m in (m_on, m_off):
        for method in m["methods"].values():
            method.pop("timing")
    assert json.dumps(m_on, sort_keys=True) == json.dumps(m_off, sort_keys=True)


def test_paper_studies_draw_no_per_run_plot() -> None:
    for study in [*paper.SWEEPS, "weights_test"]:
        cfg = _cfg(f"+experiment={study}")
        assert cfg.plots.reliability is False, study
    assert _cfg().plots.reliability is True  # a single run still draws it


def test_one_configuration_studies_run_as_single_runs() -> None:
    """The real corpora (one job each) run as single runs, their methods side by side; every
    other study as a sweep through the launcher."""
    base = ["embedder=hashing", "mlflow.tracking_uri=sqlite:///x.db"]
    common = [*base, "hydra/sweeper=check_first", "hydra/launcher=joblib",
              "hydra.launcher.n_jobs=2"]
    singles = [s for s in paper.SWEEPS if "-m" not in paper._study_command(s, base, common)[2:]]
    assert singles == ["real_site_policy", "real_peps"]
    assert paper._study_command("real_peps", base, common) == [
        "-m", "experiments.run", "+experiment=real_peps", *base]
    assert paper._study_command("table1", base, common) == [
        "-m", "experiments.run", "-m", "+experiment=table1", *common]


def _sweep(tmp: Path, *overrides: str):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return subprocess.run([sys.executable, "-m", "experiments.run", "-m", *FAST,
                           "mlflow.enabled=false", f"hydra.sweep.dir={tmp}", *overrides],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)


def test_check_first_sweeper_composes_only_the_first_job_up_front(tmp_path: Path) -> None:
    """With ``hydra/sweeper=check_first`` (the paper's studies) a job whose configuration
    does not compose fails when its turn comes, after the jobs before it ran; Hydra's basic
    sweeper composes every job first and runs none. The study's own sweep still applies."""
    bad = "methods=plain_cosine,no_such_method"
    first = _sweep(tmp_path / "first", "hydra/sweeper=check_first", bad)
    assert first.returncode != 0 and "no_such_method" in first.stderr
    assert (tmp_path / "first" / "0" / "metrics.json").is_file()
    assert "check_first.CheckFirstSweeper" in (tmp_path / "first" / "multirun.yaml").read_text()
    basic = _sweep(tmp_path / "basic", bad)
    assert basic.returncode != 0 and "no_such_method" in basic.stderr
    assert not (tmp_path / "basic" / "0").exists()
    study = _sweep(tmp_path / "study", "hydra/sweeper=check_first", "+experiment=table1_dev",
                   "methods=[plain_cosine]", "seed=100,101")
    assert study.returncode == 0, study.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "study").iterdir() if p.is_dir()) == ["0", "1"]


def test_studies_sweeper_runs_each_studys_own_jobs_in_one_launch(tmp_path: Path) -> None:
    """``hydra/sweeper=studies`` (the paper's synthetic studies in one sweep) runs exactly
    the jobs of each study's own sweep, with the same configurations and results, in the
    study's own directory numbered from 0 (a study listed twice continues its numbering);
    the sweep's own record goes to ``hydra.sweep.dir``."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    args = [*FAST, "mlflow.enabled=false", "seed=100,101"]

    def run(first: list[str], last: list[str]) -> None:
        done = subprocess.run([sys.executable, "-m", "experiments.run", "-m", *first, *args,
                               *last], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]

    run(["hydra/sweeper=studies", "hydra.sweep.dir=record",
         "hydra.sweeper.studies=[table1_dev,'weights_test methods=[plain_cosine]',"
         "weights_test]"], [])
    run(["+experiment=table1_dev"], ["hydra.sweep.dir=own/table1_dev"])
    run(["+experiment=weights_test"], ["methods=[plain_cosine]", "hydra.sweep.dir=own/wt"])
    assert "studies.StudiesSweeper" in (tmp_path / "record" / "multirun.yaml").read_text()
    assert not [p for p in (tmp_path / "record").iterdir() if p.is_dir()]

    def jobs(study: str) -> dict[str, Path]:
        (sweep_dir,) = (tmp_path / "multirun" / study).iterdir()
        assert (sweep_dir / "multirun.yaml").is_file()
        return {p.name: p for p in sweep_dir.iterdir() if p.is_dir()}

    dev, test = jobs("paper_table1_dev"), jobs("paper_weights_test")
    assert sorted(dev) == ["0", "1"] and sorted(test) == ["0", "1", "2", "3"]
    pairs = [(dev[n], tmp_path / "own" / "table1_dev" / n) for n in ("0", "1")]
    pairs += [(test[n], tmp_path / "own" / "wt" / n) for n in ("0", "1")]
    for mine, own in pairs:
        for name in (".hydra/config.yaml", ".hydra/overrides.yaml", "predictions.csv"):
            assert (mine / name).read_text() == (own / name).read_text(), (mine, name)
    assert "methods=[plain_cosine]" not in (test["2"] / ".hydra/overrides.yaml").read_text()


def test_a_study_entry_must_start_with_its_name() -> None:
    from hydra_plugins.smartvector_sweeper.studies import parse_study

    assert parse_study("weights_test  seed=1 x=2") == ("weights_test", ["seed=1", "x=2"])
    for bad in ("", "  ", "seed=1", "+experiment=table1"):
        with pytest.raises(ValueError, match="does not start with a study name"):
            parse_study(bad)


def test_the_paper_sweeps_its_synthetic_studies_at_once(monkeypatch) -> None:
    """``experiments.paper`` runs every study of several jobs in one ``studies`` sweep, in
    its order, then the real corpora as single runs, and the held-out weights (default and
    tuned) in a second sweep."""
    commands: list[list[str]] = []
    monkeypatch.setattr(paper, "_run", lambda args: commands.append(args) or 0.0)
    monkeypatch.setattr(paper, "_all_finished", lambda study, overrides: False)
    monkeypatch.setattr(paper, "best_dev_weights", lambda uri: {"semantic": 1.0})
    assert paper.main(["--embedder", "hashing", "--only", "table1", "real_peps", "regime_map",
                       "weights_test"]) == 0
    sweep, peps, weights = commands
    assert sweep[:4] == ["-m", "experiments.run", "-m", "hydra/sweeper=studies"]
    assert "hydra.sweeper.studies=['table1','regime_map']" in sweep
    assert {"hydra/launcher=joblib", "hydra.launcher.n_jobs=2"} <= set(sweep)
    assert not any(o.startswith("hydra/sweeper=check_first") for o in sweep)
    assert peps[:3] == ["-m", "experiments.run", "+experiment=real_peps"]
    assert ("hydra.sweeper.studies=['weights_test','weights_test store.weights.semantic=1.0']"
            in weights)


def test_finished_configurations_one_search(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path}/none/mlflow.db"
    assert tracking.finished_configurations(missing, "x") == {}
    assert not (tmp_path / "none" / "mlflow.db").exists()  # never creates a store
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    t = tracking.Tracker(uri, "speed", tmp_path / "art")
    with t.run("a", {"config_fingerprint": "fp-a"}) as parent:
        with t.run("m", {"config_fingerprint": "fp-a", "method": "m"}, nested=True):
            pass
    with pytest.raises(RuntimeError), t.run("b", {"config_fingerprint": "fp-b"}):
        raise RuntimeError("failed run")
    assert t.finished_run("fp-a") == parent.info.run_id
    done = tracking.finished_configurations(uri, "speed")
    assert done == {"fp-a": parent.info.run_id}  # parents only, FINISHED only
    assert tracking.finished_configurations(uri, "other") == {}


def test_sweep_jobs_expand_like_hydra_and_pending_on_an_empty_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # it would win over the URI
    jobs = paper.sweep_jobs("regime_map", ["embedder=hashing"])
    assert len(jobs) == 180 and len({" ".join(sorted(j)) for j in jobs}) == 180
    assert all("+experiment=regime_map" in j and "embedder=hashing" in j for j in jobs)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    first = paper.first_pending("table1_dev", ["embedder=hashing", f"mlflow.tracking_uri={uri}",
                                               "hydra/launcher=joblib"])
    assert first is not None and "seed=" in first
    assert not (tmp_path / "mlflow.db").exists()


def test_the_paper_checks_the_store_only_once_it_exists(monkeypatch, tmp_path: Path) -> None:
    """With no database file yet, every study is pending: the driver starts the sweep without
    checking each study against the store; once the file exists it checks them (and skips a
    study found finished)."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    commands: list[list[str]] = []
    checked: list[str] = []
    monkeypatch.setattr(paper, "_run", lambda args: commands.append(args) or 0.0)
    monkeypatch.setattr(paper, "_all_finished",
                        lambda study, overrides: checked.append(study) or study == "table1")
    db = tmp_path / "mlflow.db"
    argv = ["--embedder", "hashing", "--tracking-uri", f"sqlite:///{db}",
            "--only", "table1", "regime_map"]
    assert paper.main(argv) == 0
    assert checked == []
    assert "hydra.sweeper.studies=['table1','regime_map']" in commands[0]
    db.write_bytes(b"")  # (any file: the checks themselves are stubbed)
    assert paper.main(argv) == 0
    assert checked == ["table1", "regime_map"]
    assert "hydra.sweeper.studies=['regime_map']" in commands[1]


def test_a_finished_sweep_is_skipped_whole_and_each_job_quickly(tmp_path: Path) -> None:
    """Run a 2-job sweep, then check: the runner skips both jobs, and the paper's driver
    finds every configuration finished (same fingerprints as the runner's)."""
    import os
    import subprocess
    import sys

    # mlflow.set_tracking_uri (other tests) exports MLFLOW_TRACKING_URI, which would win
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    args = [*FAST, "methods=[plain_cosine]", "study=speedtest", "seed=0,1",
            f"mlflow.tracking_uri={uri}", f"mlflow.artifact_location={tmp_path}/art",
            f"hydra.sweep.dir={tmp_path}/multirun"]
    first = subprocess.run([sys.executable, "-m", "experiments.run", "-m", *args],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                           check=False)
    assert first.returncode == 0, first.stderr[-3000:]
    again = subprocess.run([sys.executable, "-m", "experiments.run", "-m", *args],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                           check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("skipped: speedtest-seed") == 2
    done = tracking.finished_configurations(uri, "speedtest")
    recorded = {json.loads(p.read_text())["tags"]["config_fingerprint"]
                for p in (tmp_path / "multirun").rglob("mlflow_run.json")}
    assert set(done) == recorded and len(recorded) == 2
    overrides = [o for o in args if not o.startswith(("seed=", "hydra."))]
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        fps = {runner.config_fingerprint(compose(config_name="config",
                                                 overrides=[*overrides, f"seed={s}"]), None)
               for s in (0, 1)}
    assert fps == recorded


def test_the_reembedding_study_skips_finished_configurations(tmp_path: Path) -> None:
    """The re-embedding study logs one run per configuration: run again, it skips each one
    (it recomputed and logged them all again, doubling the warm reproduction's time); with
    ``mlflow.skip_finished=false`` it runs them anew."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    args = ["-m", "experiments.reembed_study", "-m", "n_paragraphs=2", "seed=0,1", "n_docs=2",
            "n_edits=3", f"mlflow.tracking_uri={uri}", f"mlflow.artifact_location={tmp_path}/a",
            f"hydra.sweep.dir={tmp_path}/multirun"]

    def study(*extra: str) -> str:
        done = subprocess.run([sys.executable, *args, *extra], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def runs() -> list:
        from mlflow import MlflowClient

        client = MlflowClient(uri)
        exp = client.get_experiment_by_name("paper_reembed_length")
        return client.search_runs([exp.experiment_id])

    first = study()
    assert first.count("2 paragraphs: ") == 2 and "skipped" not in first
    logged = runs()
    assert len(logged) == 2 and {r.data.params["seed"] for r in logged} == {"0", "1"}
    again = study()
    assert again.count("skipped: reembed-2p-seed") == 2 and "2 paragraphs: " not in again
    assert sorted(r.info.run_id for r in runs()) == sorted(r.info.run_id for r in logged)
    forced = study("mlflow.skip_finished=false")
    assert forced.count("2 paragraphs: ") == 2 and len(runs()) == 4


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_reembedding_study_uses_the_reproductions_workers(monkeypatch, jobs: int) -> None:
    """``experiments.paper --jobs N`` runs the re-embedding study's 35 jobs on N joblib
    workers, as the other sweeps (it ran them one after another: 68 s cold, 43 s on two)."""
    commands: list[list[str]] = []
    monkeypatch.setattr(paper, "_run", lambda args: commands.append(args) or 0.0)
    assert paper.main(["--only", "reembed_length", "--jobs", str(jobs)]) == 0
    (command,) = commands
    assert command[:4] == ["-m", "experiments.reembed_study", "-m",
                           f"n_paragraphs={paper.REEMBED_LENGTHS}"]
    launcher = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    assert command[-2:] == launcher if jobs == 2 else not set(launcher) & set(command)


def test_paper_prints_each_studys_cpu_seconds(monkeypatch, capsys) -> None:
    """The timings ``experiments.paper`` prints last hold, beside each study's wall time, the
    CPU seconds its processes used (here a child that burns ~0.2 s of CPU per study)."""
    import json
    import subprocess
    import sys

    burn = ("import time\nt = time.process_time()\n"
            "while time.process_time() - t < 0.2: pass")

    def fake_run(args: list[str]) -> float:
        subprocess.run([sys.executable, "-c", burn], check=True)
        return 0.0

    monkeypatch.setattr(paper, "_run", fake_run)
    assert paper.main(["--only", "reembed_length"]) == 0
    out = capsys.readouterr().out
    timings = json.loads(out[out.rfind("\n{") + 1:])
    assert set(timings["cpu_s"]) == {"reembed_length", "total"}
    assert timings["cpu_s"]["reembed_length"] >= 0.2
    assert timings["cpu_s"]["total"] >= timings["cpu_s"]["reembed_length"]


def test_qdrant_search_matches_before_on_a_small_run(tmp_path: Path) -> None:
    """The rankings of the two collections with their id filters equal those of one
    collection with the payload filter, as before, over a whole replay (run rows compared,
    scores included).

    Two retrievers fed and queried alike: qdrant-client's local mode re-normalises the
    stored vectors in place at every cosine search, so a score's last bits depend on how
    many searches came before; a comparison must make the same calls in the same order."""
    pytest.importorskip("qdrant_client", reason="qdrant_filter needs qdrant-client")
    cfg, settings, ds, ctx, qvecs = _setup(tmp_path, "dataset.contradiction_rate=0.5",
                                           "dataset.supersession=documents",
                                           "dataset.validity_windows=true")
    fast, slow = _tiered_and_single(ctx)
    rows = [pd.DataFrame(run_rows(replay(ds, r, qvecs, k=5, schedule=settings.schedule)))
            for r in (fast, slow)]
    assert any(fast.archived) and not any(slow.archived)
    pd.testing.assert_frame_equal(rows[0], rows[1])


def _tiered_and_single(ctx):
    """The retriever as it is, and one that keeps every point in one collection and queries
    it with the payload filter, as it did before the archive."""
    fast = make_retriever("qdrant_filter", {"kind": "qdrant_filter"}, ctx)
    slow = make_retriever("qdrant_filter", {"kind": "qdrant_filter"}, ctx)
    slow.tiered = False
    slow.query_filters = lambda at: {slow.COLLECTION: slow.payload_filter(at)}
    return fast, slow


def test_qdrant_time_travel_differs_from_one_collection_only_among_tied_chunks(
        tmp_path: Path) -> None:
    """Asked "as of" past times after the whole corpus, a query also searches the archive.
    Its points were copied there (normalised once more, then no longer at each search), so
    their scores may differ from one collection's in the last bit (float32), and chunks tied
    to within that (one text repeated across documents, or two texts the hashing embedder
    scores alike) may be ordered or cut differently: only such chunks trade places."""
    pytest.importorskip("qdrant_client", reason="qdrant_filter needs qdrant-client")
    cfg, settings, ds, ctx, qvecs = _setup(tmp_path, "dataset.contradiction_rate=0.5",
                                           "dataset.supersession=documents",
                                           "dataset.validity_windows=true")
    fast, slow = _tiered_and_single(ctx)
    a, b = (pd.DataFrame(run_rows(replay(ds, r, qvecs, k=5, schedule=settings.schedule,
                                         mode="time_travel")))
            for r in (fast, slow))
    assert list(a.query_id) == list(b.query_id) and list(a["rank"]) == list(b["rank"])
    assert (a.score - b.score).abs().max() < 1e-7
    differ = a.vector_id != b.vector_id
    assert differ.sum() < 0.05 * len(a)  # a few ties, not another ranking
    for i in a.index[differ]:
        theirs = b[b.query_id == a.query_id[i]]
        mine = theirs[theirs.vector_id == a.vector_id[i]]
        # the chunk is elsewhere in the other list at its own score, or missing from it
        # because a group of chunks tied with it reaches past the last rank
        other = mine.score.iloc[0] if len(mine) else theirs.score.iloc[-1]
        assert abs(a.score[i] - other) < 1e-7, (a.query_id[i], a.vector_id[i])


def test_the_task_function_pickled_by_value_runs_the_modules_work(monkeypatch) -> None:
    """Under ``python -m experiments.run`` Hydra's task function is ``__main__``'s, and a
    joblib sweep's workers get it pickled by value, with module globals of their own for
    every job. It must reach the work through the importable module, whose state (the shared
    embedder and its model) a worker's jobs then share: with the work in its own body, every
    job made the embedder and loaded the model again."""
    import builtins
    import types

    import cloudpickle

    raw = runner.main.__wrapped__  # what Hydra hands its launcher
    as_main = types.FunctionType(raw.__code__, {"__name__": "__main__",
                                                "__builtins__": builtins}, "main")
    as_main.__module__ = "__main__"
    copy = cloudpickle.loads(cloudpickle.dumps(as_main))
    seen: list[object] = []
    monkeypatch.setattr(runner, "run_task", lambda cfg: seen.append(cfg) or 0.5)
    assert copy("the job's cfg") == 0.5 and seen == ["the job's cfg"]
