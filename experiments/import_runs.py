"""Log finished runs that could not reach MLflow (server down, store locked, logging off).

    python -m experiments.import_runs OUTPUT_DIR... [--tracking-uri URI]

Each argument is a run's output directory or any directory above some (a sweep directory:
every job under it is found). A run directory holds ``mlflow_run.json`` and ``metrics.json``,
written by every run of ``experiments.run``; importing one creates the same parent and nested
runs, params, tags, metrics, dataset input and artifacts as a live run would have (the same
function logs both). Runs already in the store (same ``run_uid`` tag, FINISHED) are skipped,
so importing twice is harmless.

The store is ``--tracking-uri``, else ``MLFLOW_TRACKING_URI``, else the one the run was
configured with; the experiment and artifact location are the run's unless overridden.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .tracking import (
    Terminated,
    Tracker,
    absolute_sqlite,
    apply_http_defaults,
    find_output_dirs,
    log_output_dir,
    one_line,
    open_tracker,
    read_record,
    sigterm_as_interrupt,
    with_pg_driver,
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m experiments.import_runs",
        description="Log run output directories (or sweep directories) to MLflow.")
    p.add_argument("paths", nargs="+", type=Path, metavar="OUTPUT_DIR",
                   help="a run's output directory, or a directory above several")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, "
                   "else the one each run was configured with)")
    p.add_argument("--experiment", help="experiment name (default: each run's)")
    p.add_argument("--artifact-location", type=Path,
                   help="artifact root for a new experiment (default: each run's)")
    p.add_argument("--force", action="store_true",
                   help="log again even if the run is already in the store")
    return p


def import_dirs(dirs: list[Path], tracking_uri: str | None = None,
                experiment: str | None = None, artifact_location: Path | None = None,
                force: bool = False) -> int:
    """Import every run directory; returns the number that failed (messages on stderr)."""
    trackers: dict[tuple[str, str, str], Tracker] = {}
    failed = 0
    for d in dirs:
        try:
            record = read_record(d)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            failed += 1
            continue
        uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or record["tracking_uri"]
        uri = with_pg_driver(absolute_sqlite(uri, Path.cwd()))
        exp = experiment or record["experiment"]
        art = Path(artifact_location or record.get("artifact_location") or "mlartifacts")
        key = (uri, exp, str(art.resolve()))
        if key not in trackers:
            tracker, reason = open_tracker(uri, exp, art.resolve())
            if tracker is None:
                print(f"error: {d}: {reason}", file=sys.stderr)
                failed += 1
                continue
            trackers[key] = tracker
        tracker = trackers[key]
        uid = record["tags"].get("run_uid")
        try:
            done = uid and not force and tracker.find_run("run_uid", uid)
            if done:
                print(f"skipped: {d} is already MLflow run {done} in {exp!r} "
                      "(log it again with --force)")
                continue
            run_id = log_output_dir(d, tracker)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # noqa: BLE001 - report, go on with the next directory
            print(f"error: {d}: {one_line(e)}", file=sys.stderr)
            failed += 1
            continue
        print(f"imported: {d} -> MLflow run {run_id} in {exp!r} ({uri})")
    return failed


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    dirs = find_output_dirs(args.paths)
    if not dirs:
        print(f"error: no run output directory (with mlflow_run.json) at or under "
              f"{', '.join(map(str, args.paths))}", file=sys.stderr)
        return 2
    apply_http_defaults()
    with sigterm_as_interrupt():
        try:
            failed = import_dirs(dirs, args.tracking_uri, args.experiment,
                                 args.artifact_location, args.force)
        except KeyboardInterrupt as e:
            how = "SIGTERM" if isinstance(e, Terminated) else "Ctrl-C"
            print(f"interrupted ({how}): run the same command again to finish (runs already "
                  "imported are skipped)", file=sys.stderr)
            return 143 if how == "SIGTERM" else 130
    if failed:
        print(f"{failed} of {len(dirs)} run directories not imported", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
