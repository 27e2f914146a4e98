"""Keeping runs intact on shared machines: signals, dead processes, SQLite write locks and
unreachable tracking servers. Used by :mod:`experiments.tracking`; no MLflow imports at
module level."""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

#: MLflow's HTTP client retries 7 times with exponential backoff and a 120 s timeout, so a
#: dead server would stall a run for minutes; these gentler defaults (applied only when the
#: variables are unset) give up after about 10 s of refused connections.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}

HOST = socket.gethostname()

T = TypeVar("T")


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name if it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- interruption ---------------------------------------------------------------------------


class Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an interrupt so runs end KILLED exactly as on Ctrl-C."""


def interrupt_of(e: BaseException) -> KeyboardInterrupt | None:
    """``e`` if it is an interrupt (Ctrl-C, or :class:`Terminated`), or the interrupt a
    ``RuntimeError`` was raised from: Python 3.11 wraps an exception raised by a class
    attribute's ``__set_name__`` in one, so an interrupt that came while a lazily imported
    module defined a dataclass (threadpoolctl's, when the first method replays) reached the
    run as "Error calling __set_name__". None for anything else."""
    while e is not None:
        if isinstance(e, KeyboardInterrupt):
            return e
        e = e.__cause__ if isinstance(e, RuntimeError) else None
    return None


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, the first SIGTERM raises :class:`Terminated`; a second one kills.

    Only in the main thread (elsewhere signal handlers cannot be installed; nothing changes).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = False

    def handler(signum: int, frame: Any) -> None:
        nonlocal fired
        if fired:  # cleanup is taking too long: die the default way
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        fired = True
        raise Terminated("SIGTERM")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class SignalHold:
    """Holds ``signals`` (default SIGINT and SIGTERM): while held (between :meth:`enter` and
    the matching :meth:`leave`, which nest), a signal that arrives is recorded instead of
    handled, and at the outermost :meth:`leave` the handlers in place before are restored
    and the first recorded signal is raised again, to be handled as it would have been. The
    same signal arriving a second time ends the hold at once (a second Ctrl-C is never
    held). Only in the main thread (elsewhere signal handlers cannot be installed; nothing
    changes)."""

    def __init__(self, signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> None:
        self.signals = signals
        self._depth = 0
        self._previous: dict[int, Any] = {}
        self._got: list[int] = []

    def enter(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self._depth += 1
        if self._depth == 1:
            self._got = []
            self._previous = {s: signal.signal(s, self._record) for s in self.signals}

    def leave(self) -> None:
        if threading.current_thread() is not threading.main_thread() or not self._depth:
            return
        self._depth -= 1
        if self._depth == 0:
            for s, handler in self._previous.items():
                signal.signal(s, handler)
            if self._got:
                signal.raise_signal(self._got[0])

    def _record(self, signum: int, frame: Any) -> None:
        self._got.append(signum)
        if self._got.count(signum) > 1:
            self._depth = 1
            self.leave()

    @property
    def held(self) -> bool:
        return self._depth > 0


@contextmanager
def signals_held() -> Iterator[None]:
    """A :class:`SignalHold` around the block."""
    hold = SignalHold()
    hold.enter()
    try:
        yield
    finally:
        hold.leave()


_NUMBA_HOLD: SignalHold | None = None
#: the hold of a single run's start-up (:func:`hold_startup`): Ctrl-C only (SIGTERM's
#: handler is installed before the hold ends, which must not restore the one before it)
STARTUP = SignalHold((signal.SIGINT,))


def hold_startup() -> None:
    """Hold Ctrl-C from a single run's first line until :func:`release_startup` (the start
    of its work, where an interrupt ends the run cleanly): one landing in the imports or in
    Hydra's composition of the configuration printed a traceback, or left OmegaConf's
    half-built configuration to fail with an unrelated error."""
    STARTUP.enter()


def release_startup() -> None:
    """End :func:`hold_startup`'s hold (an interrupt received meanwhile is raised now); a
    no-op when nothing is held."""
    STARTUP.leave()


def hold_signals_in_numba_loads() -> None:
    """Hold Ctrl-C and SIGTERM (:class:`SignalHold`) whenever numba holds its compiler lock:
    while it loads a cached kernel or compiles one. llvmlite calls numba back through ctypes
    there, and an exception raised in such a callback is printed ("Exception ignored") and
    dropped: a Ctrl-C landing during a process's first kernel loads was lost, and the run
    went on to exit 0. The signal now takes effect when the lock is released (loads take
    milliseconds; a first compile after installing, seconds). Once per process."""
    global _NUMBA_HOLD
    if _NUMBA_HOLD is not None:
        return
    from numba.core import event

    hold = _NUMBA_HOLD = SignalHold()

    class _HoldWhileLocked(event.Listener):
        def on_start(self, ev: Any) -> None:
            hold.enter()

        def on_end(self, ev: Any) -> None:
            hold.leave()

    event.register("numba:compiler_lock", _HoldWhileLocked())


def process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot ('' where /proc is unavailable).

    Together with the pid it names a process uniquely, so a recycled pid is not mistaken
    for the process that logged a run.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22; the name may contain spaces


def process_alive(pid: int, start: str = "") -> bool:
    """True if process ``pid`` (started at ``start``, when known) is still running here."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    except OSError:
        return False
    if start and Path("/proc").is_dir():
        now = process_start(pid)
        return now == start or now == ""
    return True


# --- SQLite contention ----------------------------------------------------------------------

_LOCK_MESSAGES = ("database is locked", "database table is locked")


def is_lock_error(exc: BaseException) -> bool:
    """True for SQLite's "database is locked" (also when wrapped by MLflow or SQLAlchemy)."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if any(m in str(e) for m in _LOCK_MESSAGES):
            return True
        e = e.__cause__ or e.__context__
    return False


def retry_locked(fn: Callable[..., T], *args: Any, attempts: int = 12,
                 first_delay: float = 0.05, max_delay: float = 4.0, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, retried with jittered exponential backoff while SQLite says
    "database is locked" (MLflow already waits 20 s per statement; a read that turns into a
    write fails at once instead, which is what concurrent jobs hit)."""
    for attempt in range(attempts):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if attempt == attempts - 1 or not is_lock_error(e):
                raise
            delay = min(max_delay, first_delay * 2**attempt)
            time.sleep(delay * (0.5 + random.random()))
    raise AssertionError("unreachable")


class _DropLockNoise(logging.Filter):
    """MLflow logs every locked statement with a traceback; those we retry are not news."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            return not any(m in record.getMessage() for m in _LOCK_MESSAGES)
        except Exception:  # noqa: BLE001 - a badly formatted record is not ours to judge
            return True


_QUIET = False


def quiet_mlflow_logs() -> None:
    global _QUIET
    if _QUIET:
        return
    logging.getLogger("mlflow.store.db.utils").addFilter(_DropLockNoise())
    logging.getLogger("alembic").setLevel(logging.WARNING)  # schema migration chatter
    _QUIET = True


_WAL = False
_OPEN: list[Any] = []  # (pid, connection) of each SQLite connection opened


def wal_sqlite_stores() -> None:
    """Open this process's SQLite MLflow stores in WAL mode with ``synchronous=NORMAL``
    (before the first client is made).

    MLflow's SQLite store commits every call (a run, a batch of params, a run's end) as a
    transaction. In SQLite's default rollback-journal mode each commit waits for the disk
    (several fsyncs) while it locks out every other process, readers included, so two sweep
    jobs that log at once wait for each other's disk. In WAL mode a commit appends to the
    write-ahead log, which is synced at checkpoints, and readers never block the writer.
    A commit survives the process being killed; a power cut may lose the last commits but
    leaves the database intact. The mode belongs to the database file: it stays WAL for
    every later reader (the MLflow UI included); SQLite on a network filesystem is
    unsupported in either mode. The connections are closed at exit (also by
    :func:`exit_now`), which folds the log back into the database and removes the
    ``-wal`` and ``-shm`` files.
    """
    global _WAL
    if _WAL:
        return
    import atexit
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def pragmas(conn: Any, _record: Any) -> None:
        if not isinstance(conn, sqlite3.Connection):
            return
        try:
            conn.execute("PRAGMA busy_timeout = 20000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error:  # e.g. locked for longer than the timeout: keep its mode
            pass
        _OPEN.append((os.getpid(), conn))

    event.listen(Engine, "connect", pragmas)
    atexit.register(_close_sqlite)
    _WAL = True


def _close_sqlite() -> None:
    """Close the connections :func:`wal_sqlite_stores` saw open (the last one to close a
    database checkpoints its log)."""
    while _OPEN:
        pid, conn = _OPEN.pop()
        if pid == os.getpid():  # (never a forked parent's)
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - exiting: nothing to report it to
                pass


@contextmanager
def store_lock(tracking_uri: str) -> Iterator[None]:
    """An inter-process lock for a local SQLite store (no-op for other stores).

    MLflow creates the schema of a fresh database on first use, and two processes doing so
    at once fail ("table ... already exists"); holding this lock while opening the store and
    creating the experiment makes the first job create it and the others wait. The lock is a
    ``flock`` on the database's directory: no lock file is left behind, and the database
    itself is never opened here (closing a descriptor would drop SQLite's own locks).
    """
    prefix = "sqlite:///"
    try:
        import fcntl
    except ImportError:  # not POSIX: rely on the retries
        yield
        return
    if not tracking_uri.startswith(prefix):
        yield
        return
    folder = Path(tracking_uri[len(prefix):].split("?", 1)[0]).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # MLflow will report the problem
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


# --- reachability ---------------------------------------------------------------------------


def apply_http_defaults() -> None:
    """Shorter MLflow HTTP retries/timeouts (see HTTP_DEFAULTS) unless the user set them."""
    for key, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)


_DB_PORTS = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "mssql": 1433}


def unreachable(tracking_uri: str, timeout: float = 5.0) -> str | None:
    """Why an HTTP(S) tracking server or a database server (``postgresql://``...) cannot be
    reached, or None if it answers (any HTTP status counts as an answer; for a database, a
    TCP connection) or the URI is neither. Takes at most ``timeout`` seconds (MLflow itself
    would retry a dead database for minutes)."""
    parts = urlsplit(tracking_uri)
    dialect = parts.scheme.split("+", 1)[0]
    if dialect in _DB_PORTS and parts.hostname:
        try:
            port = parts.port or _DB_PORTS[dialect]
        except ValueError:
            return f"invalid port in the {dialect} URI (host {parts.hostname})"
        try:
            with socket.create_connection((parts.hostname, port), timeout=timeout):
                return None
        except OSError as e:
            return f"cannot reach the {dialect} database at {parts.hostname}:{port}: " \
                   f"{e.strerror or one_line(e)}"
    if parts.scheme not in ("http", "https"):
        return None
    try:
        with urllib.request.urlopen(tracking_uri.rstrip("/") + "/health", timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None
    except urllib.error.URLError as e:
        return f"cannot reach {tracking_uri}: {e.reason}"
    except (OSError, ValueError) as e:
        return f"cannot reach {tracking_uri}: {one_line(e)}"


def auth_problem(exc: BaseException, tracking_uri: str) -> str | None:
    """A one-line reason when a tracking server refused the credentials (HTTP 401) or the
    user's permissions (HTTP 403), else None."""
    text = str(exc)
    if "error code 401" in text or "UNAUTHENTICATED" in text:
        user = os.environ.get("MLFLOW_TRACKING_USERNAME")
        how = (f"the password of user {user!r} was refused" if user else
               "no credentials were sent")
        return (f"MLflow server {tracking_uri} requires a login and {how}: set "
                "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD")
    if "error code 403" in text or "PERMISSION_DENIED" in text:
        user = os.environ.get("MLFLOW_TRACKING_USERNAME", "")
        return (f"MLflow server {tracking_uri} denied user {user!r} access: ask its admin "
                "for EDIT permission on the experiment")
    return None


def sqlite_problem(tracking_uri: str) -> str | None:
    """Why a local SQLite store cannot be written, or None (also for other stores).

    Checked up front because MLflow retries opening an unusable database for ~100 s. The
    database file itself is not opened (that could drop SQLite locks this process holds).
    """
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        return None
    db = Path(tracking_uri[len(prefix):].split("?", 1)[0])
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=db.parent, prefix=".write-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return f"cannot write to {db.parent}: {e.strerror or one_line(e)}"
    if db.exists() and not os.access(db, os.R_OK | os.W_OK):
        return f"cannot write to {db}: permission denied"
    return None


# --- exiting --------------------------------------------------------------------------------


def exit_now(code: int = 0) -> None:
    """End the process as Python would, minus the interpreter's teardown.

    Does what interpreter shutdown does first: stops the thread pools and joins the
    remaining non-daemon threads (``threading._shutdown``), runs the ``atexit`` handlers
    (logging's flush, MLflow's, a background model conversion's cleanup), flushes stdout and
    stderr; then ``os._exit``: freeing the thousands of modules (pandas, scipy, MLflow,
    Qdrant, matplotlib...) and the objects of a finished run one by one costs about a second
    and changes nothing on disk (the SQLite stores commit as they go)."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is None:  # not CPython: leave the exit to the interpreter
        sys.exit(code)
    shutdown()
    _exit_after_atexit(code)


def _exit_after_atexit(code: int) -> None:
    """Run the ``atexit`` handlers, flush stdout and stderr, then ``os._exit(code)``."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


#: the module whose top-level code ends a joblib (loky) worker process with ``sys.exit``
_LOKY_WORKER_MAIN = os.path.join("loky", "backend", "popen_loky_posix.py")


def exit_now_from(main_file_suffix: str) -> None:
    """Make the ``sys.exit(code)`` that the top-level code of the file ending in
    ``main_file_suffix`` calls end the process as :func:`exit_now` does (the ``atexit``
    handlers, flushed streams, ``os._exit(code)``: no teardown of the loaded modules). Any
    other ``sys.exit`` raises ``SystemExit`` as before. Idempotent."""
    if getattr(sys.exit, "_exits_now_from", None) == main_file_suffix:
        return
    raise_exit = sys.exit

    def exit_or_raise(code: Any = None) -> None:
        caller = sys._getframe(1).f_code
        if caller.co_name == "<module>" and caller.co_filename.endswith(main_file_suffix):
            _exit_after_atexit(code if isinstance(code, int) else (0 if code is None else 1))
        raise_exit(code)

    exit_or_raise._exits_now_from = main_file_suffix  # type: ignore[attr-defined]
    sys.exit = exit_or_raise


#: seconds between the full garbage collections a loky worker without psutil runs after tasks
WORKER_FULL_GC_EVERY = 60.0


def fewer_full_collections() -> None:
    """In a joblib (loky) worker without psutil: loky runs a full garbage collection after a
    task whenever a second has passed since its last one (its guard against memory kept by
    reference cycles, which with psutil it runs only once the worker's memory has grown by
    300 MB), so after nearly every job of a sweep: a walk over every object of the modules a
    job loads (MLflow, SQLAlchemy, pandas, Hydra...), 13% of the CPU of the reproduction's
    sweeps. Here it runs every :data:`WORKER_FULL_GC_EVERY` seconds instead; Python's own
    collector still runs by its thresholds. Elsewhere nothing changes."""
    loky = sys.modules.get("joblib.externals.loky.process_executor")
    if (loky is not None and not getattr(loky, "_USE_PSUTIL", True) and _in_loky_worker()
            and getattr(loky, "_MEMORY_LEAK_CHECK_DELAY", None) is not None):
        loky._MEMORY_LEAK_CHECK_DELAY = max(loky._MEMORY_LEAK_CHECK_DELAY,
                                            WORKER_FULL_GC_EVERY)


def quick_worker_exit() -> None:
    """In a joblib (loky) worker process, such as the joblib launcher's sweep workers: its
    final ``sys.exit`` skips the interpreter's teardown of the modules a job loaded (MLflow,
    pandas, Qdrant...: ~1.1 s of CPU per worker, which the sweep's process waits for at its
    exit). Elsewhere nothing changes."""
    if _in_loky_worker():
        exit_now_from(_LOKY_WORKER_MAIN)


def _in_loky_worker() -> bool:
    """Whether this process is a joblib (loky) worker (its ``__main__`` is loky's)."""
    main = sys.modules.get("__main__")
    return (getattr(main, "__file__", None) or "").endswith(_LOKY_WORKER_MAIN)
