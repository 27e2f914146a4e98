"""The paper's reference implementation (PyPI ``smartvector-rag`` 0.1.1) as a method row:
its own chunking (sentences grouped into chunks of about 200 characters), keyword
similarity, four-signal scoring and consolidation, unchanged, replayed like every other
method. ``docs/smartvector_rag.md`` describes the package and its faults.

Its import package is also named ``smartvector``, like this project's library, so it is never
imported here: it is installed with ``pip install --no-deps --target <poc_dir>`` (:func:`
ensure_poc`) and each retriever drives a long-lived worker process of its own
(:mod:`experiments.methods.reference_impl_worker`, run by path with ``PYTHONPATH=<poc_dir>``)
over JSON lines: one request per document version ingested, consolidation pass and query.

What the row passes: each version's doc id, version number, text, source type, author and
authority (never None: the PoC's default, 0.2, goes dormant after about 12 days), with
``created_at`` = the version's ``valid_from``; each query with ``reference_time`` = the time
it is asked (``top_k`` = the harness's k). ``run_consolidation()`` runs when the replay
consolidates (the first event of each later simulated day after ingestions, and before a
query), not after every ingestion. The PoC deprecates an old chunk only when the chunk with
the same ``(doc_id, chunk_index)`` is ACTIVE (db.py:133-134), so two versions of a document
ingested without a pass between them both stay in force, and chunks a shorter new version
no longer has stay ACTIVE.

Options (:class:`ReferenceImplParams`): the two work-arounds of ``docs/smartvector_rag.md``
section 7 (subclasses of the PoC's public classes, its source untouched) and faster,
result-identical conflict and relationship scans (the O(N^2) parts of a pass). With
``avoid_conflict_crash: false`` the shipped ``TypeError`` of a consolidation pass is caught
in the worker and counted (:attr:`ReferenceImplRetriever.consolidation_errors`, logged with
the run's method params); the replay goes on from the state the aborted pass left.

A PoC query scores every non-deprecated, non-dormant vector (similarity 0 included) and
records no access (``db.query`` changes no state), so time travel needs no care; but it has
no notion of a vector created after the query's time: asked "as of" an earlier time, a
later vector's age is negative and its temporal score above 1.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from experiments.data.dataset import DocVersion, Query
from experiments.methods.base import (
    Context,
    MissingExtraError,
    QueryInput,
    RankedHit,
    Ranking,
    Retriever,
    clip01,
    register,
)
from experiments.methods.reference_impl_worker import POC_VERSION
from smartvector.sources import default_authority

ROOT = Path(__file__).resolve().parents[2]
POC_SPEC = f"smartvector-rag=={POC_VERSION}"
WORKER = Path(__file__).with_name("reference_impl_worker.py")
#: how long a closing worker may take to exit before it is killed
CLOSE_TIMEOUT_S = 10.0


def poc_installed(poc_dir: Path) -> bool:
    """Whether ``poc_dir`` holds the PoC (its package and its distribution's metadata)."""
    return ((poc_dir / "smartvector" / "db.py").is_file()
            and (poc_dir / f"smartvector_rag-{POC_VERSION}.dist-info").is_dir())


def ensure_poc(poc_dir: Path | str) -> Path:
    """Install the reference implementation into ``poc_dir`` if it is not there (never into
    this interpreter: its import package is also called ``smartvector``; it runs only in
    subprocesses). pip installs into a fresh directory beside it, renamed into place, so
    two processes installing at once leave one complete copy. Raises RuntimeError (one
    line) if pip fails."""
    poc_dir = Path(poc_dir)
    if poc_installed(poc_dir):
        return poc_dir
    if poc_dir.exists() and any(poc_dir.iterdir()):
        raise RuntimeError(f"{poc_dir} exists but does not hold {POC_SPEC}: remove it to "
                           "reinstall")
    poc_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{poc_dir.name}-install-", dir=poc_dir.parent))
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
             "--disable-pip-version-check", "--target", str(tmp), POC_SPEC],
            capture_output=True, text=True, check=False)
        if out.returncode != 0 or not poc_installed(tmp):
            why = [ln for ln in out.stderr.splitlines() if ln.strip()]
            raise RuntimeError(f"pip install --target {poc_dir} {POC_SPEC} failed: "
                               f"{why[-1].strip() if why else f'exit code {out.returncode}'}")
        try:
            tmp.rename(poc_dir)  # (replaces an empty directory)
        except OSError:
            if not poc_installed(poc_dir):  # another process won: theirs is complete
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return poc_dir


@dataclass
class ReferenceImplParams:
    """``simulated_clock``: consolidation's dormancy test reads the replay's simulated time
    (a ConfidenceEngine subclass; shipped: the wall clock, consolidation.py:405 ->
    confidence.py:113, which makes every chunk dated more than ~75 days before today
    dormant at its first pass). ``created_at`` and ``reference_time`` are passed either way.
    ``avoid_conflict_crash``: conflict resolution votes by identity (shipped: ``set()`` of
    unhashable SmartVectors, ``TypeError`` at consolidation.py:135, caught and counted); the
    resolution only writes the event log, so no ranking changes. ``fast_conflict_scan``:
    difflib's ratio only for pairs whose word Jaccard passes the topic threshold (the
    conflict test is Jaccard > 0.3 and ratio < 0.4), word sets built once a pass: the same
    conflicts, faster. ``fast_relationship_scan``: the relationship builder's word sets
    built once a pass instead of twice per pair (every non-archived pair is compared at
    every pass): the same edges, faster. ``poc_dir``: where the package is installed
    (relative to the repository root), on first use if missing."""

    simulated_clock: bool = True
    avoid_conflict_crash: bool = True
    fast_conflict_scan: bool = True
    fast_relationship_scan: bool = True
    poc_dir: str = ".cache/poc"

    def __post_init__(self) -> None:
        for name in ("simulated_clock", "avoid_conflict_crash", "fast_conflict_scan",
                     "fast_relationship_scan"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false, got {value!r}")
        if not isinstance(self.poc_dir, str) or not self.poc_dir.strip():
            raise ValueError(f"poc_dir must be a non-empty path, got {self.poc_dir!r}")


def poc_path(params: ReferenceImplParams) -> Path:
    """``params.poc_dir`` as an absolute path (a relative one is under the repository)."""
    p = Path(params.poc_dir).expanduser()
    return p if p.is_absolute() else ROOT / p


def _stop(proc: subprocess.Popen, stderr: IO[bytes]) -> None:
    """Close the worker's input (it exits at end of input); kill it if it lingers."""
    try:
        if proc.poll() is None:
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=CLOSE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except OSError:
                pass
    finally:
        stderr.close()


@register("smartvector_rag")
class ReferenceImplRetriever(Retriever):
    """The reference implementation in a worker process (see the module doc)."""

    Params = ReferenceImplParams

    @classmethod
    def check(cls, params: ReferenceImplParams) -> None:
        where = poc_path(params)
        try:
            ensure_poc(where)
        except (OSError, RuntimeError) as e:
            msg = " ".join(str(e).split())
            raise MissingExtraError(f"kind smartvector_rag needs {POC_SPEC} in {where} and "
                                    f"it could not be installed: {msg}") from None

    def __init__(self, name: str, params: ReferenceImplParams, ctx: Context) -> None:
        super().__init__(name, params, ctx)
        self.poc_dir = poc_path(params)
        #: consolidation passes run, and those that raised (the shipped TypeError)
        self.consolidation_passes = 0
        self.consolidation_errors = 0
        #: each pass's counts (conflicts found, relationships built, ...) or its error
        self.consolidation_log: list[dict[str, Any]] = []
        self._chunks = 0
        self._proc: subprocess.Popen | None = None
        self._stderr: IO[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    # --- the worker ------------------------------------------------------------------------

    @property
    def worker_pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def _start(self) -> None:
        type(self).check(self.params)
        p = self.params
        options = {"simulated_clock": p.simulated_clock,
                   "avoid_conflict_crash": p.avoid_conflict_crash,
                   "fast_conflict_scan": p.fast_conflict_scan,
                   "fast_relationship_scan": p.fast_relationship_scan,
                   "harness_pid": os.getpid()}  # (the worker dies with this process)
        env = {**os.environ, "PYTHONPATH": str(self.poc_dir), "PYTHONNOUSERSITE": "1",
               "TZ": "UTC"}
        self._stderr = tempfile.TemporaryFile()
        # -S: no site-packages (nor this project's editable install); -P: not this file's
        # directory on sys.path[0]; the PoC needs the standard library only
        self._proc = subprocess.Popen(
            [sys.executable, "-S", "-P", str(WORKER), str(self.poc_dir), json.dumps(options)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env,
            cwd="/", text=True, encoding="utf-8", bufsize=1)
        self._finalizer = weakref.finalize(self, _stop, self._proc, self._stderr)
        ready = self._read("start")
        if ready.get("poc_version") != POC_VERSION:
            self.close()
            raise RuntimeError(f"method {self.name}: the smartvector-rag worker runs version "
                               f"{ready.get('poc_version')} from {ready.get('poc_file')}, "
                               f"expected {POC_VERSION}")

    def close(self) -> None:
        """End the worker (it exits when its input closes); idempotent."""
        if self._finalizer is not None:
            self._finalizer()

    def _died(self, during: str) -> RuntimeError:
        proc, rc = self._proc, None
        if proc is not None:
            try:
                rc = proc.wait(timeout=CLOSE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                rc = None
        tail = ""
        if self._stderr is not None and not self._stderr.closed:
            self._stderr.seek(0)
            lines = [ln.strip() for ln in
                     self._stderr.read().decode("utf-8", "replace").splitlines() if ln.strip()]
            tail = " | ".join(lines[-3:])[-600:]
        pid = proc.pid if proc is not None else "?"
        self.close()
        return RuntimeError(
            f"method {self.name}: the smartvector-rag worker (pid {pid}, {WORKER.name}) died "
            f"during {during} (exit code {rc}): {tail or 'no output on stderr'}")

    def _read(self, during: str) -> dict[str, Any]:
        line = self._proc.stdout.readline()
        if not line:
            raise self._died(during)
        return json.loads(line)

    def _call(self, op: str, **req: Any) -> dict[str, Any]:
        if self._proc is None:
            self._start()
        if self._proc.poll() is not None:
            raise self._died(op)
        try:
            self._proc.stdin.write(json.dumps({"op": op, **req}) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            raise self._died(op) from None
        out = self._read(op)
        if not out.get("ok"):
            raise RuntimeError(f"method {self.name}: the smartvector-rag worker failed on "
                               f"{op}: {out.get('error')} (at {out.get('where')})")
        return out

    # --- the retriever ---------------------------------------------------------------------

    def ingest(self, version: DocVersion) -> int:
        authority = version.authority
        if authority is None:
            authority = default_authority(version.source_type)
        out = self._call("ingest", doc_id=version.doc_id, version=version.version,
                         text=version.text, source_type=version.source_type,
                         author=version.author or "", authority=float(authority),
                         ts=version.ts)
        self._chunks += out["chunks"]
        return out["chunks"]

    def consolidate(self, at: float) -> None:
        out = self._call("consolidate", at=at)
        self.consolidation_passes += 1
        if out["error"]:
            self.consolidation_errors += 1
        self.consolidation_log.append({k: v for k, v in out.items() if k != "ok"})

    def search(self, query: QueryInput, at: float, k: int, gold: Query | None = None
               ) -> Ranking:
        out = self._call("query", text=query.text, at=at, k=k)
        hits = [RankedHit(h["vector_id"], h["doc_id"], h["text"], float(h["score"]),
                          {"semantic": float(h["semantic"]), "temporal": float(h["temporal"]),
                           "confidence": float(h["confidence"]),
                           "relational": float(h["relational"])})
                for h in out["hits"]]
        return Ranking(hits, clip01(hits[0].score) if hits else float("nan"))

    def feedback(self, hit: RankedHit, accepted: bool, at: float) -> None:
        self._call("feedback", vector_id=hit.vector_id, accepted=bool(accepted))

    def events(self) -> list[dict[str, Any]]:
        """The PoC consolidation agent's event log (vector ids as ``doc@vN#chunk``)."""
        return self._call("events")["events"]

    @property
    def size(self) -> int:
        return self._chunks

    @property
    def recorded_params(self) -> dict[str, Any]:
        """The options, and the consolidation passes run and those that raised."""
        return {**dataclasses.asdict(self.params),
                "consolidation_passes": self.consolidation_passes,
                "consolidation_errors": self.consolidation_errors}
