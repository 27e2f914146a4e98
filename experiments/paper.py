"""Reproduce the paper: run every study as Hydra sweeps logged to MLflow.

``python -m experiments.paper`` then ``python -m experiments.figures`` (tables, figures and
the report's tables in ``results/``, from the MLflow store alone).

Studies: Table 1 with ablation and calibration (``+experiment=table1``, test seeds 0-19, and
``table1_dev`` on the development seeds 100-104 that calibration maps are fitted on), the
regime map (``regime_map``: pool x query timing x rumor rate x supersession), robustness to
injected contradictions, time-travel queries, simulated feedback, re-embedding cost vs
document length, a sensitivity analysis of the temporal half-life and the contradiction
threshold, the effect of the authority-age correlation, and a weight grid tuned on the
development half of seed 0's queries and reported on the held-out test half of five seeds.
Configurations already finished in the store are skipped, so an interrupted reproduction
resumes where it stopped; a study whose configurations are all finished is not started at
all (:func:`first_pending`; ``--force-sweeps`` starts it anyway). The studies of several
jobs run as one sweep on one set of workers (:func:`studies_command`), the real corpora as
single runs, then the re-embedding study and the held-out weights.
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from smartvector import ScoringWeights

from .tracking import resolve_tracking_uri, sqlite_file_missing

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
SWEEPS = ("table1", "table1_dev", "regime_map", "robustness", "time_travel", "feedback",
          "sensitivity", "authority", "weights_dev", "real_site_policy", "real_peps")
REEMBED_LENGTHS = "5,10,20,50,100,200,500"
#: the timings' name of the one sweep that runs every study of several jobs (all but the
#: real corpora's single runs, the re-embedding study and the held-out weights)
SWEPT = "sweeps"


def _cpu_s() -> float:
    """User + system CPU seconds of this process and its ended children (and of the
    processes they waited for): a study's CPU is the difference around it, the check
    against the store that may skip it included."""
    return sum(r.ru_utime + r.ru_stime for r in
               (resource.getrusage(resource.RUSAGE_SELF),
                resource.getrusage(resource.RUSAGE_CHILDREN)))


def _run(args: list[str]) -> float:
    print("$ python " + " ".join(args), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], check=False)
    if proc.returncode != 0:
        raise SystemExit(f"error: study failed (exit {proc.returncode}): python {' '.join(args)}")
    return time.perf_counter() - t0


def sweep_jobs(study: str, overrides: list[str]) -> list[list[str]]:
    """The overrides of every job of ``python -m experiments.run -m +experiment=<study>
    <overrides>``, expanded as Hydra's basic sweeper expands them (the study's
    ``hydra.sweeper.params`` first, then the command line's). Composed once per study and
    overrides in this process (the driver asks for each study's jobs more than once)."""
    return [list(job) for job in _sweep_jobs(study, tuple(overrides))]


@functools.cache
def _sweep_jobs(study: str, overrides: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    from hydra import compose, initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from .config import register

    register()  # the structured schemas the configs name
    args = [f"+experiment={study}", *overrides]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        hc = compose(config_name="config", overrides=args, return_hydra_config=True).hydra
    params = [f"{k}={v}" for k, v in (hc.sweeper.params or {}).items()]
    parsed = OverridesParser.create().parse_overrides([*params, *args])
    return tuple(tuple(job) for batch in BasicSweeper.split_arguments(parsed, None)
                 for job in batch)


def first_pending(study: str, overrides: list[str]) -> str | None:
    """The first job of the study's sweep whose configuration is not FINISHED in the
    MLflow store (its overrides, space-separated), or None when every one is: the whole
    sweep can then be skipped without starting it (Hydra, its workers and a configuration
    composition per job for nothing). Each job's fingerprint is computed as the runner
    computes it (:func:`experiments.run.config_fingerprint`) and looked up in one search per
    experiment (:func:`experiments.tracking.finished_configurations`). Anything this cannot
    decide counts as pending: the sweep then runs, and skips what is finished itself."""
    from hydra import compose, initialize_config_dir

    from . import run as runner
    from .tracking import finished_configurations

    base = Path.cwd()
    jobs = sweep_jobs(study, [o for o in overrides if not o.startswith("hydra")])
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        for job in jobs:
            cfg = compose(config_name="config", overrides=job)
            if not (cfg.mlflow.enabled and cfg.mlflow.skip_finished):
                return " ".join(job)
            uri = resolve_tracking_uri(cfg.mlflow.tracking_uri, base)
            done = finished_configurations(uri, cfg.mlflow.experiment)
            fp = runner.config_fingerprint(cfg, runner._dataset_fingerprint(cfg, base))
            if not done or fp not in done:
                return " ".join(job)
    return None


def _all_finished(study: str, overrides: list[str]) -> bool:
    try:
        pending = first_pending(study, overrides)
    except Exception as e:  # noqa: BLE001 - cannot tell: run the sweep (it skips by itself)
        print(f"note: could not check {study} against the store ({e}); running its sweep",
              flush=True)
        return False
    if pending is None:
        print(f"skipped: study {study}: every configuration already finished in the store",
              flush=True)
    return pending is None


def _study_command(study: str, base: list[str], common: list[str]) -> list[str]:
    """The command that runs a study on its own: a sweep (``-m``, with ``common``'s launcher),
    or, for a study of one configuration (the real corpora), a single run with ``base``'s
    overrides: a single run replays its methods side by side on every core and embeds in a
    process of its own, where a one-job sweep would replay them one at a time in one process.
    The results are the same either way (the output directory is ``outputs/`` instead of
    ``multirun/``)."""
    if is_single_run(study, base):
        return ["-m", "experiments.run", f"+experiment={study}", *base]
    return ["-m", "experiments.run", "-m", f"+experiment={study}", *common]


def is_single_run(study: str, base: list[str]) -> bool:
    """Whether the study is one configuration (run as a single run, not a sweep)."""
    return len(sweep_jobs(study, base)) == 1


def studies_command(studies: list[str], common: list[str]) -> list[str]:
    """One sweep of several studies' jobs (``hydra/sweeper=studies``): each entry is a study
    name, optionally followed by overrides of its own. The jobs are the studies' own sweeps'
    (same configurations, same directories ``multirun/<study>/<time>``), launched together
    on one set of workers: one process and one start of the workers instead of one per study,
    and no core left idle at the end of each study. The sweep's own record
    (``multirun.yaml``) goes to ``multirun/paper/<time>``."""
    from hydra_plugins.smartvector_sweeper.studies import quoted

    launcher = [o for o in common if not o.startswith("hydra/sweeper=")]
    return ["-m", "experiments.run", "-m", "hydra/sweeper=studies",
            f"hydra.sweeper.studies=[{','.join(quoted(s) for s in studies)}]",
            "hydra.sweep.dir=multirun/paper/${now:%Y-%m-%d_%H-%M-%S}", *launcher]


def best_dev_weights(tracking_uri: str) -> dict[str, float]:
    """The grid point with the highest development accuracy (ties: the one nearest the
    paper's defaults, then the smallest weights), read from the MLflow store."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    exp = mlflow.get_experiment_by_name("paper_weights_dev")
    if exp is None:
        raise SystemExit("error: no paper_weights_dev experiment in the MLflow store")
    runs = mlflow.search_runs([exp.experiment_id], output_format="list",
                              filter_string="tags.method = 'smartvector' and "
                                            "attributes.status = 'FINISHED'")
    default = ScoringWeights()
    names = ("semantic", "temporal", "confidence", "relational")

    def key(run) -> tuple:
        w = [float(run.data.params[f"store.weights.{n}"]) for n in names]
        total = sum(w)
        dist = sum((x / total - getattr(default, n)) ** 2 for x, n in zip(w, names, strict=True))
        return (-run.data.metrics["top1_accuracy"], round(dist, 12), w)

    if not runs:
        raise SystemExit("error: the weight grid has no finished runs")
    best = min(runs, key=key)
    return {n: float(best.data.params[f"store.weights.{n}"]) for n in names}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="minilm", help="minilm (default) or hashing")
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db")
    parser.add_argument("--jobs", type=int, default=2,
                        help="parallel jobs per sweep (joblib launcher; 1: one after another "
                             "in one process)")
    parser.add_argument("--only", nargs="*", default=None,
                        help=f"studies to run (default all): {', '.join(SWEEPS)}, "
                             "reembed_length, weights_test")
    parser.add_argument("--force-sweeps", action="store_true",
                        help="start every study's sweep even when the store already holds "
                             "all its configurations (the sweep still skips finished jobs)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    base = [f"embedder={args.embedder}", f"mlflow.tracking_uri={args.tracking_uri}"]
    launcher = (["hydra/launcher=joblib", f"hydra.launcher.n_jobs={args.jobs}"]
                if args.jobs > 1 else [])  # each worker loads the model once, for its jobs
    # the studies' configurations are composed by the tests: each sweep composes only its
    # studies' first jobs before launching (hydra_plugins/smartvector_sweeper)
    common = [*base, "hydra/sweeper=check_first", *launcher]
    wanted = set(args.only) if args.only else set(SWEEPS) | {"reembed_length", "weights_test"}
    timings: dict[str, float] = {}
    cpu: dict[str, float] = {}  # CPU seconds of each step (this process's and its children's)
    t0, cpu0 = time.perf_counter(), _cpu_s()

    def step(name: str, run: Callable[[], object]) -> None:
        t1, c1 = time.perf_counter(), _cpu_s()
        run()
        timings[name] = time.perf_counter() - t1
        cpu[name] = _cpu_s() - c1

    studies = [n for n in SWEEPS if n in wanted]
    singles = [n for n in studies if is_single_run(n, base)]
    swept = [n for n in studies if n not in singles]
    uri = resolve_tracking_uri(args.tracking_uri, Path.cwd())
    if swept:  # the synthetic studies: one sweep of every study with a job left to run
        def sweep() -> None:
            # with no database yet every study is pending: checking each (~1.2 s on one
            # core before the sweep starts) would say so
            fresh = sqlite_file_missing(uri)
            pending = [n for n in swept
                       if args.force_sweeps or fresh or not _all_finished(n, common)]
            if pending:
                _run(studies_command(pending, common))
        step(SWEPT, sweep)
    for name in singles:
        def single(name: str = name) -> None:
            if args.force_sweeps or not _all_finished(name, common):
                _run(_study_command(name, base, common))
        step(name, single)
    if "reembed_length" in wanted:
        step("reembed_length", lambda: _run([
            "-m", "experiments.reembed_study", "-m", f"n_paragraphs={REEMBED_LENGTHS}",
            "seed=0,1,2,3,4", f"mlflow.tracking_uri={args.tracking_uri}", *launcher]))
    if "weights_test" in wanted:
        tuned = best_dev_weights(uri)
        print(f"weights chosen on the development split: {tuned}")

        def weights_test() -> None:
            entries = [" ".join(["weights_test", *extra]) for extra in
                       ([], [f"store.weights.{k}={v}" for k, v in tuned.items()])]
            pending = [e for e in entries if args.force_sweeps
                       or not _all_finished("weights_test", [*common, *e.split()[1:]])]
            if pending:
                _run(studies_command(pending, common))
        step("weights_test", weights_test)
    timings["total"] = time.perf_counter() - t0
    cpu["total"] = _cpu_s() - cpu0
    print(json.dumps({**{k: round(v, 1) for k, v in timings.items()},
                      "cpu_s": {k: round(v, 1) for k, v in cpu.items()}}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
