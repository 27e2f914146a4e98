"""The sweepers' memoised job composition gives what Hydra's own composition gives."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from experiments.compose_memo import MemoConfigLoader
from experiments.config import register
from experiments.paper import SWEEPS, sweep_jobs

ROOT = Path(__file__).resolve().parents[1]
#: the paper's sweep: its own overrides (the master configuration's) and each job's tail
MASTER = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "hydra/sweeper=studies",
          "hydra.sweeper.studies=[table1,regime_map]", "hydra.sweep.dir=multirun/paper"]
TAIL = ["embedder=minilm", "mlflow.tracking_uri=sqlite:///mlflow.db"]


@pytest.fixture(scope="module")
def paper_jobs() -> dict[str, list[list[str]]]:
    register()
    return {s: sweep_jobs(s, []) for s in SWEEPS}


@pytest.fixture
def hydra_loader():
    register()
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        master = compose("config", MASTER, return_hydra_config=True)
        yield GlobalHydra.instance().config_loader(), master


def _same(a, b) -> None:
    assert OmegaConf.to_yaml(a) == OmegaConf.to_yaml(b)  # the hydra node included, unresolved
    assert OmegaConf.is_struct(a) and OmegaConf.is_struct(b)
    assert not OmegaConf.is_readonly(a.hydra) and not OmegaConf.is_readonly(b.hydra)


def test_paper_jobs_compose_as_hydra_composes_them(hydra_loader, paper_jobs) -> None:
    """The first jobs and the last of every study of the reproduction, as the studies
    sweeper launches them (its directory overrides last): identical configurations, the
    hydra node included, and all but each study's first from the memo."""
    loader, master = hydra_loader
    memo = MemoConfigLoader(loader)
    n = 0
    for study, jobs in paper_jobs.items():
        for i in sorted({0, 1, 2, len(jobs) - 1} & set(range(len(jobs)))):
            job = jobs[i]
            job = [*job, *TAIL, f"hydra.sweep.dir='multirun/{study}'", f"hydra.sweep.subdir={i}"]
            _same(memo.load_sweep_config(master, job), loader.load_sweep_config(master, job))
            n += 1
    assert memo.hits == n - len(paper_jobs) and memo.hits > 20


def test_a_group_choice_that_looks_like_a_value_stays_part_of_the_shape(hydra_loader) -> None:
    """``embedder=hashing`` picks a config group option: a job that picks another option is
    composed afresh, not from the first job's configuration with a value changed."""
    loader, master = hydra_loader
    memo = MemoConfigLoader(loader)
    for embedder, seed in [("hashing", 0), ("minilm", 1), ("hashing", 2), ("minilm", 3)]:
        job = [f"embedder={embedder}", f"seed={seed}"]
        got = memo.load_sweep_config(master, job)
        _same(got, loader.load_sweep_config(master, job))
        assert got.seed == seed and got.hydra.runtime.choices.embedder == embedder
    assert memo.hits == 2  # the third and fourth jobs, each from its own option's first


def test_values_that_are_dicts_or_lists_are_composed_by_hydra(hydra_loader) -> None:
    """A dict value merges into what the key holds: applying a second job's dict to the
    first job's configuration would keep the first's keys. Such overrides stay literal."""
    loader, master = hydra_loader
    memo = MemoConfigLoader(loader)
    for job in (["+methods.extra={kind: smartvector, pool: 3}", "seed=0"],
                ["+methods.extra={kind: plain_cosine}", "seed=1"],
                ["methods=[plain_cosine,smartvector]", "seed=2"],
                ["methods=[plain_cosine]", "seed=3"]):
        _same(memo.load_sweep_config(master, job), loader.load_sweep_config(master, job))
    got = memo.load_sweep_config(master, ["+methods.extra={kind: plain_cosine}", "seed=4"])
    assert "pool" not in got.methods.extra
    assert memo.hits == 1  # only the last: the second job's shape, seed 1 -> 4


def test_order_dirname_and_the_override_lists_follow_each_job(hydra_loader) -> None:
    loader, master = hydra_loader
    memo = MemoConfigLoader(loader)
    jobs = [["seed=1", "dataset.contradiction_rate=0.25", "hydra.sweep.subdir=0"],
            ["seed=2", "dataset.contradiction_rate=0.75", "hydra.sweep.subdir=1"],
            ["dataset.contradiction_rate=0", "seed=3", "hydra.sweep.subdir=2"]]
    for job in jobs:
        got = memo.load_sweep_config(master, job)
        _same(got, loader.load_sweep_config(master, job))
    assert got.hydra.job.override_dirname == "dataset.contradiction_rate=0,seed=3"
    assert list(got.hydra.overrides.task) == ["dataset.contradiction_rate=0", "seed=3"]
    assert list(got.hydra.overrides.hydra)[-1] == "hydra.sweep.subdir=2"
    assert got.hydra.sweep.subdir == "2" and got.dataset.contradiction_rate == 0
    assert memo.hits == 1  # the third job's order is a shape of its own


def test_a_bad_value_fails_as_hydra_fails_it(hydra_loader) -> None:
    loader, master = hydra_loader
    memo = MemoConfigLoader(loader)
    memo.load_sweep_config(master, ["seed=1"])
    with pytest.raises(Exception) as theirs:
        loader.load_sweep_config(master, ["seed=abc"])
    with pytest.raises(Exception) as ours:
        memo.load_sweep_config(master, ["seed=abc"])
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value) and "seed" in str(ours.value)
    with pytest.raises(Exception, match="no_such_key"):
        memo.load_sweep_config(master, ["no_such_key=1"])


def test_a_pickled_loader_shares_the_memo_of_its_process(hydra_loader) -> None:
    """Launchers pickle the loader with every job: a copy keeps its token (not the memo, nor
    the count), so a worker reuses the shapes it composed for earlier jobs. (Unpickled here
    from its state: cloudpickle would rebuild the configs' dataclasses in this process.)"""
    loader, master = hydra_loader
    memo = MemoConfigLoader(loader)
    memo.load_sweep_config(master, ["seed=1"])
    state = memo.__getstate__()
    assert state == {"inner": loader, "token": memo.token, "hits": 0}
    copy = MemoConfigLoader.__new__(MemoConfigLoader)
    copy.__dict__.update(state)  # what unpickling does with it
    _same(copy.load_sweep_config(master, ["seed=2"]), loader.load_sweep_config(master, ["seed=2"]))
    assert copy.hits == 1
    other = MemoConfigLoader(loader)
    other.load_sweep_config(master, ["seed=2"])
    assert other.hits == 0  # another loader (another sweep) composes its own first


def test_the_sweepers_wrap_their_loader_once_and_only_under_hydra_1_3(monkeypatch) -> None:
    import hydra
    from hydra.types import HydraContext

    from experiments.compose_memo import memo_context

    plain = HydraContext(config_loader=object(), callbacks=None)
    wrapped = memo_context(plain)
    assert isinstance(wrapped.config_loader, MemoConfigLoader)
    assert wrapped.config_loader.inner is plain.config_loader
    assert memo_context(wrapped) is wrapped
    monkeypatch.setattr(hydra, "__version__", "1.4.0")
    assert memo_context(plain) is plain
