"""Reproduce the paper: every study's configurations, on a pool of worker processes.

``python -m experiments.studies.paper`` then ``python -m experiments.studies.figures``
(tables, figures and the report's tables in ``results/``, from the results directories
alone).

Studies: Table 1 with ablation and calibration (``table1``, test seeds 0-19, and
``table1_dev`` on the development seeds 100-104 that calibration maps are fitted on), the
regime map (pool x query timing x rumor rate x supersession), robustness to injected
contradictions, time-travel queries, simulated feedback, re-embedding cost vs document
length, a sensitivity analysis, the authority-age correlation, a weight grid tuned on the
development half of seed 0's queries and reported on the held-out test half of five seeds,
and the two real corpora.

Each study is ``conf/experiment/<study>.yaml``; its jobs are the configurations Hydra's
sweep of ``python -m experiments.run -m +experiment=<study>`` would run (the study's
``hydra.sweeper.params``), composed with Hydra's public compose API and run by
:func:`experiments.run.run_pipeline`, exactly as a command-line run. A configuration whose
results directory is finished is skipped before it is sent to a worker, so an interrupted
reproduction resumes where it stopped. Each job's printed output goes to
``multirun/paper/<time>/<study>-<n>.log``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import itertools
import json
import multiprocessing
import os
import resource
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from experiments.ops.resilience import exit_with_parent
from smartvector import ScoringWeights

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
#: the studies, longest jobs first (the real corpora's single jobs take minutes)
STUDIES = ("real_site_policy", "real_peps", "real_endoflife", "verdict_real", "verdict_dev_real",
           "weights_dev", "table1", "table1_dev", "regime_map", "verdict_synth_versions",
           "verdict_synth_documents", "verdict_dev_synth_versions",
           "verdict_dev_synth_documents", "robustness", "time_travel", "feedback",
           "sensitivity", "authority")
REEMBED_LENGTHS = (5, 10, 20, 50, 100, 200, 500)
REEMBED_SEEDS = (0, 1, 2, 3, 4)
WEIGHT_NAMES = ("semantic", "temporal", "confidence", "relational")


@dataclass(frozen=True)
class Job:
    """One configuration: which app runs it, its study, its number and its config."""

    app: str  # "run" (experiments.run) or "reembed" (experiments.studies.reembed_study)
    study: str
    number: int
    config: dict[str, Any]


def _parse(overrides: list[str]) -> list[Any]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides(overrides)


def sweep(overrides: list[str]) -> list[list[str]]:
    """The jobs of a sweep: the cartesian product of the sweep overrides' values (in their
    order), each with the plain overrides, as Hydra's basic sweeper expands them."""
    lists = []
    for o in _parse(overrides):
        key = o.input_line.split("=", 1)[0]
        values = list(o.sweep_string_iterator()) if o.is_sweep_override() else None
        lists.append([f"{key}={v}" for v in values] if values else [o.input_line])
    return [list(job) for job in itertools.product(*lists)]


def compose(config_name: str, overrides: list[str], hydra_node: bool = False) -> DictConfig:
    """A configuration as ``python -m experiments.<app> <overrides>`` composes it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from experiments.config import register

    register()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        return hydra_compose(config_name=config_name, overrides=overrides,
                             return_hydra_config=hydra_node)


_ABSENT = object()


class StudyConfigs:
    """A study's configurations, composing the study once: a job that only changes scalar
    values of existing keys is that composition with the values set (OmegaConf's public
    ``update``, the values parsed by Hydra's override grammar); any other job is composed in
    full. A test compares both ways on every study."""

    def __init__(self, config_name: str, base: list[str]) -> None:
        self.config_name, self.base = config_name, base
        self.composed = compose(config_name, base)

    def job(self, overrides: list[str]) -> DictConfig:
        extra = overrides[len(self.base):] if overrides[:len(self.base)] == self.base \
            else None
        cfg = self.composed.copy()
        if extra is None:
            return compose(self.config_name, overrides)
        for o in _parse(extra):
            key = o.key_or_group
            node = OmegaConf.select(cfg, key, default=_ABSENT)
            if (o.type.name != "CHANGE" or o.package is not None or node is _ABSENT
                    or isinstance(node, DictConfig)):
                return compose(self.config_name, overrides)
            OmegaConf.update(cfg, key, o.value(), merge=True)
        return cfg


def study_jobs(study: str, base: list[str]) -> list[Job]:
    """Every configuration of ``conf/experiment/<study>.yaml`` with ``base`` overrides."""
    args = [f"+experiment={study}", *base]
    node = compose("config", args, hydra_node=True).hydra
    params = [f"{k}={v}" for k, v in (node.sweeper.params or {}).items()]
    configs = StudyConfigs("config", args)
    return [Job("run", study, i, OmegaConf.to_container(configs.job(job), resolve=True))
            for i, job in enumerate(_ordered(args, params))]


def _ordered(args: list[str], params: list[str]) -> list[list[str]]:
    """The study's overrides first, then one value of each swept key."""
    return [[*args, *job] for job in sweep(params)] if params else [list(args)]


def reembed_jobs(base: list[str]) -> list[Job]:
    """The re-embedding study's configurations (documents of each length, five seeds)."""
    from experiments.studies import reembed_study  # noqa: F401 - registers its schema

    configs = StudyConfigs("reembed_study", base)
    jobs = []
    for i, (n, seed) in enumerate(itertools.product(REEMBED_LENGTHS, REEMBED_SEEDS)):
        cfg = configs.job([*base, f"n_paragraphs={n}", f"seed={seed}"])
        jobs.append(Job("reembed", "reembed_length", i, OmegaConf.to_container(cfg,
                                                                                 resolve=True)))
    return jobs


def finished(job: Job, base_dir: Path) -> bool:
    """Whether the job's results directory is finished (a configuration read in place is
    never assumed finished here: its worker checks the data's content)."""
    from experiments.data.registry import get_kind
    from experiments.results.record import is_finished, results_dir
    from experiments.run import config_fingerprint
    from experiments.studies.reembed_study import REEMBED_FILE, config_fingerprint_of

    cfg = OmegaConf.create(job.config)
    if not cfg.mlflow.skip_finished:
        return False
    if job.app == "reembed":
        out = results_dir(base_dir / cfg.results_root, cfg.study, config_fingerprint_of(cfg))
        return (out / REEMBED_FILE).is_file()
    if not get_kind(cfg.dataset.kind).generated:  # its worker checks the data's content
        return False
    out = results_dir(base_dir / cfg.results_root, cfg.study, config_fingerprint(cfg, None))
    return is_finished(out)


def run_job(job: Job, base_dir: str, log: str) -> int:
    """Run one job in this process, its output into ``log``; returns its exit code."""
    from experiments.run import run_pipeline
    from experiments.studies.reembed_study import run_reembed

    cfg = OmegaConf.create(job.config)
    with open(log, "w", encoding="utf-8") as fh, redirect_stdout(fh), redirect_stderr(fh):
        try:
            if job.app == "reembed":
                run_reembed(cfg, Path(base_dir))
            else:
                run_pipeline(cfg, Path(base_dir))
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else 1
        except Exception:  # noqa: BLE001 - a fault of one job: in its log, the others go on
            traceback.print_exc()
            return 1
    return 0


def best_dev_weights(results_root: Path) -> dict[str, float]:
    """The grid point with the highest development accuracy (ties: the one nearest the
    paper's defaults, then the smallest weights), read from the results directories."""
    from experiments.studies.figures import Store

    runs = Store(results_root).parents("paper_weights_dev")
    runs = [r for r in runs if "smartvector" in r.methods]
    if not runs:
        raise SystemExit("error: the weight grid has no finished results")
    default = ScoringWeights()

    def key(run) -> tuple:
        w = [float(run.data.params[f"store.weights.{n}"]) for n in WEIGHT_NAMES]
        total = sum(w)
        dist = sum((x / total - getattr(default, n)) ** 2
                   for x, n in zip(w, WEIGHT_NAMES, strict=True))
        return (-run.methods["smartvector"]["top1_accuracy"], round(dist, 12), w)

    best = min(runs, key=key)
    return {n: float(best.data.params[f"store.weights.{n}"]) for n in WEIGHT_NAMES}


def _cpu_s() -> float:
    return sum(r.ru_utime + r.ru_stime for r in
               (resource.getrusage(resource.RUSAGE_SELF),
                resource.getrusage(resource.RUSAGE_CHILDREN)))


def execute(jobs: Iterator[Job], n_workers: int, base_dir: Path, log_dir: Path,
            bar: tqdm) -> list[str]:
    """Run the jobs (at most ``n_workers`` at once; 1: in this process); returns the
    failures, one line each."""
    failures = []

    def done(job: Job, code: int) -> None:
        bar.update()
        if code != 0:
            failures.append(f"{job.study} job {job.number} (exit {code}): see "
                            f"{log_dir / f'{job.study}-{job.number}.log'}")

    if n_workers == 1:
        for job in jobs:
            done(job, run_job(job, str(base_dir), str(log_dir / f"{job.study}-"
                                                               f"{job.number}.log")))
        return failures
    context = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(n_workers, mp_context=context,
                                initializer=exit_with_parent,
                                initargs=(os.getpid(),)) as pool:
        running = {}
        for job in jobs:
            if len(running) >= 2 * n_workers:
                ended, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
                for f in ended:
                    done(running.pop(f), f.result())
            running[pool.submit(run_job, job, str(base_dir),
                                str(log_dir / f"{job.study}-{job.number}.log"))] = job
        for f in cf.as_completed(running):
            done(running[f], f.result())
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="minilm", help="minilm (default) or hashing")
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db")
    parser.add_argument("--results-root", default="outputs")
    parser.add_argument("--jobs", type=int, default=2,
                        help="worker processes (1: one job after another in this process)")
    parser.add_argument("--only", nargs="*", default=None,
                        help=f"studies to run (default all): {', '.join(STUDIES)}, "
                             "reembed_length, weights_test")
    parser.add_argument("--force", action="store_true",
                        help="run every configuration again, even finished ones")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    base_dir = Path.cwd()
    base = [f"embedder={args.embedder}", f"mlflow.tracking_uri={args.tracking_uri}",
            f"results_root={args.results_root}", "mlflow.detail=false",
            *(["mlflow.skip_finished=false"] if args.force else [])]
    wanted = list(args.only) if args.only else [*STUDIES, "reembed_length", "weights_test"]
    unknown = set(wanted) - {*STUDIES, "reembed_length", "weights_test"}
    if unknown:
        parser.error(f"unknown study {sorted(unknown)[0]!r}")
    log_dir = base_dir / "multirun" / "paper" / time.strftime("%Y-%m-%d_%H-%M-%S")
    log_dir.mkdir(parents=True, exist_ok=True)
    t0, cpu0 = time.perf_counter(), _cpu_s()
    jobs = [j for s in STUDIES if s in wanted for j in study_jobs(s, base)]
    if "reembed_length" in wanted:
        jobs += reembed_jobs([b for b in base if not b.startswith(("embedder=",
                                                                   "mlflow.detail="))])
    pending = [j for j in jobs if not finished(j, base_dir)]
    print(f"{len(jobs)} configurations, {len(jobs) - len(pending)} already finished; "
          f"job logs in {log_dir}", flush=True)
    with tqdm(total=len(pending), desc="configurations", unit="job") as bar:
        failures = execute(iter(pending), args.jobs, base_dir, log_dir, bar)
    timings = {"studies": time.perf_counter() - t0}
    if "weights_test" in wanted and not failures:
        tuned = best_dev_weights(base_dir / args.results_root)
        print(f"weights chosen on the development split: {tuned}", flush=True)
        held_out = [j for extra in ([], [f"store.weights.{k}={v}" for k, v in tuned.items()])
                    for j in study_jobs("weights_test", [*base, *extra])]
        held_out = [Job(j.app, j.study, n, j.config) for n, j in enumerate(held_out)]
        todo = [j for j in held_out if not finished(j, base_dir)]
        with tqdm(total=len(todo), desc="held-out weights", unit="job") as bar:
            failures += execute(iter(todo), args.jobs, base_dir, log_dir, bar)
    timings["total"] = time.perf_counter() - t0
    for line in failures:
        print(f"error: {line}", file=sys.stderr)
    print(json.dumps({**{k: round(v, 1) for k, v in timings.items()},
                      "cpu_s": round(_cpu_s() - cpu0, 1)}, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
