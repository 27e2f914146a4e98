"""The paper's driver and figures: each study's configurations are the ones Hydra's sweep
would run (composed once per study, values set through OmegaConf's public update), finished
configurations are skipped, and the figures read the results directories."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from experiments.studies import paper
from experiments.studies.figures import Store

ROOT = Path(__file__).resolve().parents[1]
BASE = ["embedder=hashing", "mlflow.tracking_uri=sqlite:///unused.db"]


def test_sweep_expands_like_hydras_basic_sweeper() -> None:
    jobs = paper.sweep(["a=1,2", "b=x", "c=true,false,null"])
    assert jobs == [[f"a={a}", "b=x", f"c={c}"] for a in ("1", "2")
                    for c in ("True", "False", "null")]
    assert paper.sweep([]) == [[]]


@pytest.mark.parametrize("study", paper.STUDIES)
def test_study_configurations_equal_hydras_full_composition(study: str) -> None:
    """Every study: the number of jobs its sweep params give, and three random jobs (plus
    the first and last) equal to a full composition of the same overrides."""
    jobs = paper.study_jobs(study, BASE)
    node = paper.compose("config", [f"+experiment={study}", *BASE], hydra_node=True).hydra
    expected = 1
    for values in (node.sweeper.params or {}).values():
        expected *= len(str(values).split(","))
    assert len(jobs) == expected and [j.number for j in jobs] == list(range(expected))
    args = [f"+experiment={study}", *BASE]
    overrides = paper._ordered(args, [f"{k}={v}" for k, v in
                                      (node.sweeper.params or {}).items()])
    picks = {0, len(jobs) - 1, *random.Random(study).sample(range(len(jobs)),
                                                            min(3, len(jobs)))}
    for i in sorted(picks):
        full = OmegaConf.to_container(paper.compose("config", overrides[i]), resolve=True)
        assert jobs[i].config == full, (study, overrides[i])


def test_a_job_that_changes_a_group_is_composed_in_full() -> None:
    configs = paper.StudyConfigs("config", ["embedder=hashing"])
    cfg = configs.job(["embedder=hashing", "dataset=site_policy"])
    assert cfg.dataset.kind == "site_policy"
    assert OmegaConf.to_container(cfg, resolve=True) == OmegaConf.to_container(
        paper.compose("config", ["embedder=hashing", "dataset=site_policy"]), resolve=True)


def test_finished_configurations_are_skipped_and_figures_read_them(tmp_path: Path,
                                                                   monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "datasets").symlink_to(ROOT / "datasets")
    base = ["embedder=hashing", f"mlflow.tracking_uri=sqlite:///{tmp_path}/m.db",
            "results_root=out", "mlflow.enabled=false", "methods=[plain_cosine,latest_only]",
            "reembed.n_edits=0", "n_boot=50"]
    (job,) = [j for j in paper.study_jobs("table1_dev", base) if j.config["seed"] == 100]
    assert not paper.finished(job, tmp_path)
    assert paper.run_job(job, str(tmp_path), str(tmp_path / "job.log")) == 0
    assert paper.finished(job, tmp_path)
    (run,) = Store(tmp_path / "out").parents("paper_table1_dev")
    assert run.data.params["seed"] == "100" and set(run.methods) == {"plain_cosine",
                                                                     "latest_only"}
    pred = Store(tmp_path / "out").predictions(run)
    assert len(pred) == 2 * 138 and set(pred["seed"]) == {"100"}


def test_reembed_study_configurations() -> None:
    base = ["mlflow.tracking_uri=sqlite:///unused.db"]
    jobs = paper.reembed_jobs(base)
    assert len(jobs) == len(paper.REEMBED_LENGTHS) * len(paper.REEMBED_SEEDS)
    assert {j.app for j in jobs} == {"reembed"}
    last = jobs[-1].config
    assert (last["n_paragraphs"], last["seed"]) == (paper.REEMBED_LENGTHS[-1],
                                                    paper.REEMBED_SEEDS[-1])
    full = paper.compose("reembed_study", [*base, "n_paragraphs=500", "seed=4"])
    assert last == OmegaConf.to_container(full, resolve=True)
