"""Harness timings: the main job cold and warm, the site-policy corpus cold, and the whole
paper reproduction cold and warm.

    python -m benchmarks.bench_harness [--only main,site_policy,paper] [--keep DIR]

Each part runs its commands, as a user would type them, in a fresh scratch directory that
holds only a link to ``datasets/`` (no embedding cache, no MLflow store, no outputs), with an
empty model cache (``SMARTVECTOR_CACHE_DIR``: the converted OpenVINO model lives there, once
per user); then again, in the same or another fresh directory. The numba kernels' compiled
cache (beside ``smartvector/kernels.py``) is kept: it is built once per install.

* ``main``: ``python -m experiments.run`` the first time on the machine (converts the model);
  ``cold``: in another fresh directory (no embedding cache, no MLflow store; the model
  converted); ``warm``: again there with ``mlflow.skip_finished=false`` (warm caches, a new
  run); ``skipped``: again as is (already in MLflow). Runs of a few seconds move by a second
  with the machine's load, so cold, warm and skipped are measured ``--repeats`` times (3 by
  default; each round in a new directory, the rounds one after another) and the median is
  reported, with every run.
* ``site_policy``: ``python -m experiments.run +experiment=real_site_policy`` cold, model
  conversion included (embeds the corpus's 12,678 chunk texts with all-MiniLM-L6-v2, then
  replays every method).
* ``paper``: ``python -m experiments.studies.paper`` cold, model conversion included (every study,
  two jobs at a time), then again (every configuration already finished: skipped); each
  step's wall time and CPU, as the command prints them, are kept too (``studies_s``,
  ``studies_cpu_s``: the one sweep of every study of several jobs, each real corpus, the
  re-embedding study, the held-out weights).

Writes ``results/benchmarks/harness.json``; the last line printed gives every wall time.
``--keep DIR`` leaves each part's directory in ``DIR/<part>``: the timed reproduction's MLflow
store then regenerates the tables (``python -m experiments.studies.figures --tracking-uri
sqlite:///DIR/paper/scratch0/mlflow.db``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import RESULTS, ROOT, machine, write_result

RUN = ["-m", "experiments.run"]
#: part -> steps (label, command, True: in a new scratch directory)
PARTS = {
    "main": [("first", RUN, True), ("cold", RUN, True),
             ("warm", [*RUN, "mlflow.skip_finished=false"], False),
             ("skipped", RUN, False)],
    "site_policy": [("cold", [*RUN, "+experiment=real_site_policy"], True)],
    "paper": [("cold", ["-m", "experiments.studies.paper"], True),
              ("warm", ["-m", "experiments.studies.paper"], False)],
}


#: parts whose steps after the first are repeated (``--repeats``), the median reported
REPEATED = {"main"}


def steps_of(name: str, repeats: int) -> list[tuple[str, list[str], bool]]:
    """The part's steps in the order they run: those after the first ``repeats`` times over
    for a part in :data:`REPEATED` (round after round)."""
    steps = PARTS[name]
    if name not in REPEATED or repeats <= 1:
        return steps
    return [steps[0], *(step for _ in range(repeats) for step in steps[1:])]


def run_part(name: str, log, repeats: int = 1, keep: Path | None = None) -> dict:
    """Run the part's steps; with ``keep``, in ``keep/<name>`` (which must not exist), left
    in place afterwards (the paper's MLflow store, for ``experiments.studies.figures``), else in a
    temporary directory."""
    runs: dict[str, list[dict]] = {}
    if keep is not None:
        kept = Path(keep) / name
        kept.mkdir(parents=True)  # FileExistsError: never mix with an earlier run's store
        scratch = contextlib.nullcontext(str(kept))
    else:
        scratch = tempfile.TemporaryDirectory(prefix=f"bench_harness_{name}_")
    with scratch as root:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT),
               "SMARTVECTOR_CACHE_DIR": str(Path(root) / "user-cache")}
        work = None
        for i, (label, args, fresh) in enumerate(steps_of(name, repeats)):
            if fresh or work is None:
                work = Path(root) / f"scratch{i}"
                work.mkdir()
                (work / "datasets").symlink_to(ROOT / "datasets")
            load0 = os.getloadavg()[0]
            cpu0 = children_cpu_s()
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, *args], cwd=work, env=env,
                                  capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t
            cpu = children_cpu_s() - cpu0
            if proc.returncode != 0:
                raise SystemExit(f"error: {name} {label} failed (exit {proc.returncode}):\n"
                                 f"{proc.stderr[-2000:]}")
            run = {"command": "python " + " ".join(args), "wall_s": round(wall, 1),
                   "cpu_s": round(cpu, 1), "cores_busy": round(cpu / wall, 2),
                   "new_directory": fresh, "load_avg_before": round(load0, 2),
                   "load_avg_after": round(os.getloadavg()[0], 2)}
            studies = study_times(proc.stdout) if name == "paper" else None
            if studies:
                cpu_of = studies.pop("cpu_s", None)
                run["studies_s"] = studies
                if isinstance(cpu_of, dict):
                    run["studies_cpu_s"] = cpu_of
            runs.setdefault(label, []).append(run)
            log(f"  {name} {label}: {wall:.1f} s, {cpu:.1f} CPU-s (load {load0:.1f} -> "
                f"{os.getloadavg()[0]:.1f})")
    return {label: median_run(rs) for label, rs in runs.items()}


def children_cpu_s() -> float:
    """User + system CPU seconds of this process's ended children, theirs included (the
    processes each waited for): a command's CPU is the difference around it."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def study_times(stdout: str) -> dict[str, float] | None:
    """The wall time of each study that ``experiments.studies.paper`` prints last (a JSON object),
    or None if its output does not end with one."""
    start = stdout.rfind("\n{")
    try:
        times = json.loads(stdout[start + 1:] if start >= 0 else stdout)
    except json.JSONDecodeError:
        return None
    return times if isinstance(times, dict) else None


def median_run(runs: list[dict]) -> dict:
    """The run with the median wall time (of an odd count; the lower middle one of an even
    count), with every run's wall time and load before it when there are several."""
    if len(runs) == 1:
        return runs[0]
    out = dict(sorted(runs, key=lambda r: r["wall_s"])[(len(runs) - 1) // 2])
    out["runs_s"] = [r["wall_s"] for r in runs]
    out["runs_load_avg_before"] = [r["load_avg_before"] for r in runs]
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="main,site_policy,paper",
                    help="comma-separated parts: main, site_policy, paper")
    ap.add_argument("--repeats", type=int, default=3,
                    help="times the main job's cold, warm and skipped steps are measured (the "
                         "median is reported)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep", default=None, metavar="DIR",
                    help="run each part in DIR/<part> (must not exist) and keep it: the "
                         "paper's MLflow store is then DIR/paper/scratch0/mlflow.db")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats must be >= 1, got {args.repeats}")
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    path = Path(args.out) if args.out else RESULTS / "harness.json"
    # parts not run now keep their earlier measurement (each records its own machine)
    res = json.loads(path.read_text()) if path.exists() else {"benchmark": "harness",
                                                              "parts": {}}
    keep = Path(args.keep).resolve() if args.keep else None
    if keep is not None and any((keep / name).exists() for name in parts):
        ap.error(f"--keep: {keep} already holds a directory of one of the parts")
    for name in parts:
        print(f"{name}:", flush=True)
        info = machine()
        t0 = time.perf_counter()
        res["parts"][name] = {"machine": info, **run_part(name, lambda s: print(s, flush=True),
                                                          args.repeats, keep)}
        res["parts"][name]["wall_s"] = round(time.perf_counter() - t0, 1)
    write_result("harness", res, str(path))
    print("; ".join(f"{n} {lab} {p[lab]['wall_s']} s" for n, p in res["parts"].items()
                    for lab, *_ in PARTS[n] if lab in p))
    return res


if __name__ == "__main__":
    main()
