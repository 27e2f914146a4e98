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
resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from smartvector import ScoringWeights

from .tracking import resolve_tracking_uri

SWEEPS = ("table1", "table1_dev", "regime_map", "robustness", "time_travel", "feedback",
          "sensitivity", "authority", "weights_dev", "real_site_policy", "real_peps")
REEMBED_LENGTHS = "5,10,20,50,100,200,500"


def _run(args: list[str]) -> float:
    print("$ python " + " ".join(args), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], check=False)
    if proc.returncode != 0:
        raise SystemExit(f"error: study failed (exit {proc.returncode}): python {' '.join(args)}")
    return time.perf_counter() - t0


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
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    common = [f"embedder={args.embedder}", f"mlflow.tracking_uri={args.tracking_uri}"]
    if args.jobs > 1:  # each worker process loads the model once and keeps it for its jobs
        common += ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={args.jobs}"]
    wanted = set(args.only) if args.only else set(SWEEPS) | {"reembed_length", "weights_test"}
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    for name in SWEEPS:
        if name in wanted:
            timings[name] = _run(["-m", "experiments.run", "-m", f"+experiment={name}",
                                  *common])
    if "reembed_length" in wanted:
        timings["reembed_length"] = _run([
            "-m", "experiments.reembed_study", "-m", f"n_paragraphs={REEMBED_LENGTHS}",
            "seed=0,1,2,3,4", f"mlflow.tracking_uri={args.tracking_uri}"])
    if "weights_test" in wanted:
        uri = resolve_tracking_uri(args.tracking_uri, Path.cwd())
        tuned = best_dev_weights(uri)
        print(f"weights chosen on the development split: {tuned}")
        timings["weights_test"] = _run(["-m", "experiments.run", "-m",
                                        "+experiment=weights_test", *common])
        timings["weights_test"] += _run(["-m", "experiments.run", "-m",
                                         "+experiment=weights_test", *common,
                                         *[f"store.weights.{k}={v}" for k, v in tuned.items()]])
    timings["total"] = time.perf_counter() - t0
    print(json.dumps({k: round(v, 1) for k, v in timings.items()}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
