"""MLflow for a single run, in a child process that starts with the run.

Importing MLflow and opening its store costs ~2.5 s of CPU; a single ``python -m
experiments.run`` pays it every time, before its own work. :class:`BackgroundLogger` starts a
child process (``python -m experiments.log_worker``) that does that start-up (the "already
finished?" test, opening the store, reaping dead runs) on the other core while the run
evaluates, then logs the finished output directory, as :func:`tracking.log_output_dir` (and
``experiments.import_runs``) would, when the run hands it over.

The two talk in JSON lines: the run sends the settings, then the output directory (or closes
the pipe: nothing to log); the child answers once when the store is open (``ready``,
``finished``: the configuration is already in MLflow, or ``offline``: the store cannot be
used) and once when the run is logged (``logged`` or ``failed``). The child writes its answers
on its own copy of stdout and sends everything else libraries print to stderr.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, TextIO

#: how long to wait for the child to end after the run is done with it
_END_TIMEOUT = 60.0
#: a child started at the run's first line (:func:`prespawn`), not yet given settings
_PRESPAWNED: subprocess.Popen | None = None


def _spawn() -> subprocess.Popen:
    """The child, started with SIGINT blocked until its :func:`main` can take a Ctrl-C:
    a Ctrl-C reaches the whole process group, and one that came while the child's
    interpreter started ended it with a "Fatal Python error" or a traceback on the run's
    stderr. Blocked here only while forking: a Ctrl-C meanwhile reaches the run afterwards."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "experiments.log_worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def prespawn() -> None:
    """Start the child now, before the run's own imports, so that it loads MLflow while the
    run loads everything else. The run gives it work (:class:`BackgroundLogger`) or, if it
    turns out not to need it (a sweep, MLflow off, a bad configuration), it is killed at
    exit or by :func:`discard_prespawned`; it touches no store before it has settings."""
    global _PRESPAWNED
    if {"-m", "--multirun"} & set(sys.argv[1:]):
        return  # a sweep logs in its jobs' own processes
    if _PRESPAWNED is None:
        _PRESPAWNED = _spawn()
        atexit.register(discard_prespawned)


def discard_prespawned() -> None:
    """Kill a prespawned child that was given no work (it has done nothing but import)."""
    global _PRESPAWNED
    proc, _PRESPAWNED = _PRESPAWNED, None
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


class BackgroundLogger:
    """The run's side: start the child, read its status, hand over the output directory.

    Use as a context manager: leaving the block ends the child (it stops waiting for an
    output directory); a child still logging when an exception (Ctrl-C, SIGTERM) leaves the
    block is sent SIGTERM, which ends its runs KILLED, as in the run's own process.
    """

    def __init__(self, tracking_uri: str, experiment: str, artifact_location: Path,
                 config_fingerprint: str, skip_finished: bool) -> None:
        settings = {"tracking_uri": tracking_uri, "experiment": experiment,
                    "artifact_location": str(artifact_location),
                    "config_fingerprint": config_fingerprint, "skip_finished": skip_finished,
                    "source": sys.argv[0]}  # MLflow's "source" of the runs: the command
        global _PRESPAWNED
        self.tracking_uri = tracking_uri
        self._proc, _PRESPAWNED = (_PRESPAWNED or _spawn()), None
        self._status: dict[str, Any] | None = None
        self._logging = False
        self._send(settings)

    def __enter__(self) -> BackgroundLogger:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(abort=exc_type is not None)

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(message) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the child is gone: reading its answer says so

    def _read(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait()
            return {"state": "offline",
                    "reason": f"the MLflow logging process ended unexpectedly (exit {code})"}
        return json.loads(line)

    def status(self, wait: bool = True) -> dict[str, Any] | None:
        """The child's first answer (``state``: ready, finished or offline); with
        ``wait=False``, None while it is still starting."""
        if self._status is None:
            assert self._proc.stdout is not None
            if not wait and not select.select([self._proc.stdout], [], [], 0)[0]:
                return None
            self._status = self._read()
        return self._status

    def log(self, out_dir: Path, error: dict[str, str] | None,
            plot: str | None = None) -> dict[str, Any]:
        """Hand over a finished output directory (``error``: the run failed in that phase;
        ``plot``: first draw the reliability plot from its predictions, with this title);
        returns the child's answer: ``logged`` with ``run_id``, or ``failed``/``offline`` with
        ``reason``. Only after a ``ready`` status."""
        self._logging = True
        self._send({"out_dir": str(Path(out_dir).resolve()), "error": error, "plot": plot})
        answer = self._read()
        self._logging = False
        return answer

    def close(self, abort: bool = False) -> None:
        """End the child: close its input (it stops waiting); on ``abort``, a child that is
        logging is also sent SIGTERM (the run it is logging ends KILLED)."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
        if abort and self._logging and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout=_END_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


def _serve(settings: dict[str, Any], commands: TextIO, answer: TextIO) -> int:
    from .tracking import log_output_dir, mark_failed, one_line, open_for_run

    def reply(message: dict[str, Any]) -> None:
        answer.write(json.dumps(message) + "\n")
        answer.flush()

    status, tracker = open_for_run(
        settings["tracking_uri"], settings["experiment"],
        Path(settings["artifact_location"]), settings["config_fingerprint"],
        settings["skip_finished"])
    reply(status)
    if tracker is None:
        return 0
    import matplotlib.figure  # noqa: F401 - loaded while the run evaluates
    import pandas  # noqa: F401 - (the plot's child reads the predictions with it)

    from .metrics import RELIABILITY_PLOT
    line = commands.readline()
    if not line:  # the run ended without results (skipped, failed early, interrupted)
        return 0
    job = json.loads(line)
    uri = settings["tracking_uri"]
    out_dir = Path(job["out_dir"])
    drawing = _Drawing(out_dir, job["plot"]) if job.get("plot") else None
    try:
        run_id = log_output_dir(out_dir, tracker,
                                later=(RELIABILITY_PLOT,) if drawing else (),
                                wait=drawing.wait if drawing else None)
        if job.get("error"):
            mark_failed(uri, run_id, job["error"])
    except Exception as e:  # noqa: BLE001 - the results are safe on disk; the run says how
        reply({"state": "failed", "reason": f"logging to {uri} failed: {one_line(e)}"})
        return 0
    finally:
        if drawing is not None:
            drawing.wait()
    reply({"state": "logged", "run_id": run_id})
    return 0


class _Drawing:
    """The run's reliability plot, drawn from its ``predictions.csv`` in a forked child
    while this process logs the run (this process has no other thread, and the child touches
    nothing but the plot: it ends with ``os._exit``). A plot that cannot be drawn is a
    warning on stderr, never a lost run."""

    def __init__(self, out_dir: Path, title: str) -> None:
        from .metrics import RELIABILITY_PLOT, plot_predictions_reliability
        from .tracking import one_line

        sys.stderr.flush()
        self._pid: int | None = os.fork()
        if self._pid == 0:
            code = 1
            try:
                import pandas as pd

                plot_predictions_reliability(pd.read_csv(out_dir / "predictions.csv"),
                                             out_dir / RELIABILITY_PLOT, title)
                code = 0
            except KeyboardInterrupt:  # Ctrl-C reaches the whole process group
                pass
            except BaseException as e:  # noqa: BLE001 - a missing plot must not lose the run
                print(f"warning: no reliability plot: {one_line(e)}", file=sys.stderr)
            finally:
                sys.stderr.flush()
                os._exit(code)

    def wait(self) -> None:
        """Wait for the child (at once if it has already been waited for)."""
        pid, self._pid = self._pid, None
        if pid is not None:
            os.waitpid(pid, 0)


def main() -> int:
    """The child: answers on a private copy of stdout; everything printed goes to stderr."""
    answer = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        # a Ctrl-C since the start (SIGINT blocked by _spawn) is raised here, and caught
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        import mlflow  # noqa: F401 - the slow part, before the settings arrive

        from .resilience import sigterm_as_interrupt

        with sigterm_as_interrupt():
            settings = json.loads(sys.stdin.readline() or "null")
            if settings is None:
                return 0
            if settings.get("source"):  # runs name the run's command, not this module
                sys.argv[0] = settings["source"]
            return _serve(settings, sys.stdin, answer)
    except (KeyboardInterrupt, RuntimeError) as e:
        # Ctrl-C or the run's SIGTERM (runs in progress ended KILLED), also when Python 3.11
        # wrapped it in a RuntimeError (a lazy import defining a class when it came)
        from .resilience import interrupt_of

        if interrupt_of(e) is None:
            raise
        return 130


if __name__ == "__main__":
    from .resilience import exit_now

    exit_now(main())  # the run waits for this process: skip the interpreter's teardown
