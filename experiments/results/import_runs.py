"""Log results directories to MLflow (runs that could not reach it, or another store).

    python -m experiments.results.import_runs RESULTS_DIR... [--tracking-uri URI]

Each argument is a configuration's results directory or any directory above some (every
``results.json`` under it is found). Importing creates the same runs as a live run (the same
function logs both). Methods already in the store from the same execution are skipped, so
importing twice is harmless.

The store is ``--tracking-uri``, else ``MLFLOW_TRACKING_URI``, else the one each run was
configured with; for a SQLite store, artifacts go beside the database.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

from experiments.ops.resilience import (
    Terminated,
    apply_http_defaults,
    one_line,
    sigterm_as_interrupt,
)
from experiments.results.mlflow_export import (
    Experiment,
    absolute_sqlite,
    artifact_location_for,
    log_results,
    open_experiment,
    with_pg_driver,
)
from experiments.results.record import CONFIG_FILE, find_results_dirs, read_results


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m experiments.results.import_runs",
                                description="Log results directories to MLflow.")
    p.add_argument("paths", nargs="+", type=Path, metavar="RESULTS_DIR",
                   help="a configuration's results directory, or a directory above several")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, "
                   "else the one each run was configured with)")
    p.add_argument("--experiment", help="experiment name (default: each run's)")
    p.add_argument("--artifact-location", type=Path,
                   help="artifact root for a new experiment (default: beside a SQLite store)")
    p.add_argument("--force", action="store_true",
                   help="log again even if the runs are already in the store")
    return p


def import_dirs(dirs: list[Path], tracking_uri: str | None = None,
                experiment: str | None = None, artifact_location: Path | None = None,
                force: bool = False) -> int:
    """Import every results directory; returns the number that failed (messages on
    stderr)."""
    opened: dict[tuple[str, str], Experiment] = {}
    failed = 0
    for d in dirs:
        try:
            read_results(d)
            config = yaml.safe_load((d / CONFIG_FILE).read_text(encoding="utf-8"))
        except (ValueError, OSError, yaml.YAMLError) as e:
            print(f"error: {d}: {one_line(e)}", file=sys.stderr)
            failed += 1
            continue
        mlflow = config.get("mlflow", {})
        uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or \
            mlflow.get("tracking_uri", "sqlite:///mlflow.db")
        uri = with_pg_driver(absolute_sqlite(uri, Path.cwd()))
        name = experiment or mlflow.get("experiment") or config.get("study", "default")
        if (uri, name) not in opened:
            location = artifact_location_for(uri, artifact_location, Path.cwd())
            exp, reason = open_experiment(uri, name, location)
            if exp is None:
                print(f"error: {d}: {reason}", file=sys.stderr)
                failed += 1
                continue
            opened[(uri, name)] = exp
        try:
            ids = log_results(d, opened[(uri, name)], force=force)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # noqa: BLE001 - report, go on with the next directory
            print(f"error: {d}: {one_line(e)}", file=sys.stderr)
            failed += 1
            continue
        if ids:
            print(f"imported: {d} -> {len(ids)} MLflow run(s) in {name!r} ({uri})")
        else:
            print(f"skipped: {d} is already in {name!r} (log it again with --force)")
    return failed


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    dirs = find_results_dirs(args.paths)
    if not dirs:
        print(f"error: no results directory (with results.json) at or under "
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
        print(f"{failed} of {len(dirs)} results directories not imported", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
