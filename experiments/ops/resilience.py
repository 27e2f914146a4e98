"""Keeping runs intact on shared machines: signals, dead processes, SQLite write locks and
unreachable tracking servers. Used by :mod:`experiments.results.mlflow_export`; no MLflow imports at
module level."""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
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


def exit_with_parent(parent: int, poll_s: float = 0.5) -> None:
    """In a worker process (a pool's ``initializer``, ``initargs=(os.getpid(),)``): kill this
    process within ``poll_s`` of the death of ``parent``, even in the middle of a job. A pool
    worker whose parent was killed (``kill -9``) would otherwise wait on its task queue for
    ever; what it had not finished is redone by the next run (its claim on the configuration
    dies with it). ``parent`` comes from the parent: a worker still starting when its parent
    died has been handed to another one already."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


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
    """True if process ``pid`` (started at ``start``, when known) is still running here (a
    zombie, ended but not yet reaped by its parent, is not)."""
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
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return True  # no /proc: os.kill's answer
    return stat[0] != "Z" and (not start or stat[19] == start)


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
