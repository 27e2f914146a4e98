"""A job's results on disk: the record every table, figure and MLflow run is made from.

Each configuration has its own directory, ``<results.root>/<study>/<fingerprint>/``, named by
its configuration's fingerprint. It holds:

- ``config.yaml``: the resolved configuration;
- ``predictions.csv``: one row per query and method (the top-1 hit and its grade);
- ``run.csv``: each method's ranking, one row per query and rank, with its raw scores;
- ``runs/<method>.txt``: the same rankings as TREC runs of chunk ids, ``qrels/<set>.txt``
  the relevance labels at each question's time as TREC qrels, and ``beir/`` the chunk
  corpus, queries and qrels in BEIR's layout (:mod:`experiments.protocol.labels`);
- ``left_out.csv``: the queries left out (unanswerable, or labels that cannot be right) and why;
- ``dataset/``: the corpus and queries, for a generated dataset;
- ``reliability.png`` (when ``plots.reliability``);
- ``results.json``: :class:`RunResults`, written last: its presence (without an ``error``)
  is what "finished" means.

A directory is claimed (:func:`claim`) before any work: a second process running the same
configuration waits for the first and then finds it finished.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smartvector.fileio import atomic_write_text

FORMAT = 3
RESULTS_FILE = "results.json"
CONFIG_FILE = "config.yaml"
PREDICTIONS_FILE = "predictions.csv"
RUN_FILE = "run.csv"
RUNS_DIR = "runs"
LEFT_OUT_FILE = "left_out.csv"
LOCK_FILE = ".claim"


@dataclass
class MethodResult:
    """One method's figures: its parameters in force, quality (deterministic) and timing
    (wall clock) metrics."""

    params: dict[str, Any]
    quality: dict[str, float]
    timing: dict[str, float]


@dataclass
class CorpusSummary:
    """What was replayed: counts and the dataset's content fingerprint."""

    kind: str
    documents: int
    versions: int
    queries: int
    injected: int
    vectors: int
    fingerprint: str
    #: where the corpus lies: ``dataset`` (generated into the results directory) or a path
    source: str = "dataset"
    #: queries left out: no version of their documents states the answer (the loader) ...
    unanswerable: int = 0
    #: ... or their relevance labels cannot be right (``left_out.csv`` says why)
    label_problems: int = 0


@dataclass
class RunResults:
    """Everything a configuration's job measured (``results.json``)."""

    study: str
    seed: int
    config_fingerprint: str
    corpus: CorpusSummary
    methods: dict[str, MethodResult]
    reembed: dict[str, float] = field(default_factory=dict)
    #: ``{"phase": ..., "message": ...}`` when a phase failed (the others' results are kept)
    error: dict[str, str] | None = None
    #: git commit, package versions, host, a unique id of this job's execution
    provenance: dict[str, str] = field(default_factory=dict)
    format: int = FORMAT

    @property
    def name(self) -> str:
        return f"{self.study}-seed{self.seed}-{self.config_fingerprint[:6]}"


def results_dir(root: Path, study: str, config_fingerprint: str) -> Path:
    """The directory of one configuration's results."""
    return Path(root) / study / config_fingerprint


def write_results(out_dir: Path, results: RunResults) -> Path:
    """Write ``results.json`` atomically (the last file a job writes)."""
    text = json.dumps(dataclasses.asdict(results), indent=2, sort_keys=True, default=str)
    return atomic_write_text(Path(out_dir) / RESULTS_FILE, text + "\n")


def read_results(out_dir: Path) -> RunResults:
    """The ``results.json`` of a results directory (ValueError with a one-line reason)."""
    path = Path(out_dir) / RESULTS_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{out_dir}: no {RESULTS_FILE} (not a finished results "
                         "directory)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: unreadable: {str(e).splitlines()[0]}") from None
    if raw.get("format") != FORMAT:
        raise ValueError(f"{path}: format {raw.get('format')!r}, expected {FORMAT}")
    try:
        raw["corpus"] = CorpusSummary(**raw["corpus"])
        raw["methods"] = {k: MethodResult(**v) for k, v in raw["methods"].items()}
        return RunResults(**raw)
    except (KeyError, TypeError) as e:
        raise ValueError(f"{path}: does not match the results schema: {e}") from None


def is_finished(out_dir: Path) -> bool:
    """True when the directory holds results without an error."""
    try:
        return read_results(out_dir).error is None
    except ValueError:
        return False


@contextmanager
def claim(out_dir: Path) -> Iterator[None]:
    """Hold the configuration's directory for this process. A lock held by another process
    (the same configuration running elsewhere on this machine) is waited for. The lock is
    the operating system's (``flock``): a process that dies, even by SIGKILL, releases it."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(out_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting: another process is running this configuration ({out_dir})",
                  file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (closing releases the lock)


def find_results_dirs(paths: list[Path]) -> list[Path]:
    """Every directory at or under ``paths`` holding a ``results.json``, sorted."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if (p / RESULTS_FILE).is_file():
            found.add(p)
        elif p.is_dir():
            found.update(f.parent for f in p.rglob(RESULTS_FILE))
    return sorted(found)
