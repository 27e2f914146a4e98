"""Replay a run's methods in forked worker processes, so that a single run uses every core.

The methods of one run are independent (each builds its own store from the shared, memoised
embeddings), so they can run side by side. The workers are forked from the run's process
after the corpus and its embeddings are loaded: they start in milliseconds and share those
pages instead of loading them again. Forking is only safe while no model runtime (torch,
OpenVINO) has started its thread pool in this process (see :func:`can_fork`), so a run that
must embed with the model does it in a forked process of its own first
(:func:`encode_aside`), which fills the embedding cache the run then reads.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import traceback
from collections.abc import Callable, Collection, Iterator, Sequence
from multiprocessing import connection
from typing import Any

from .resilience import signals_held

#: modules whose runtime keeps thread pools that do not survive ``fork``
_FORK_UNSAFE = ("torch", "openvino", "onnxruntime")

#: seconds between two ``ready`` calls while workers replay methods
CHECK_EVERY = 0.05

_work: Callable[[str], Any] | None = None  # set before forking; the workers inherit it


def workers_for(setting: int, single_run: bool, n_methods: int) -> int:
    """How many processes replay the methods: ``setting`` if positive, else one per core in
    a single run and 1 in a sweep (whose jobs already share the cores); never more than
    there are methods."""
    if setting < 0:
        raise ValueError(f"method_workers must be >= 0 (0: automatic), got {setting}")
    n = setting or (_cores() if single_run else 1)
    return max(1, min(n, n_methods))


def _cores() -> int:
    """The cores this process may run on (its affinity mask, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Whether worker processes can be forked from this one: on a platform with ``fork``
    and with no model runtime imported (its threads would be missing in the children)."""
    return ("fork" in multiprocessing.get_all_start_methods()
            and not any(m in sys.modules for m in _FORK_UNSAFE))


def encode_aside(embedder: Any, texts: Sequence[str]) -> bool:
    """Embed those of ``texts`` that ``embedder`` (a disk-cached one: with ``uncached``) has
    not cached, in a forked process, so that the model's runtime never loads here and the
    method workers can still be forked. The child embeds exactly what this process's
    ``encode(texts)`` would have (the same texts in the same order: the same batches), and
    that ``encode`` then finds them all in the cache. True if the child embedded them; on any
    failure the caller's own ``encode`` embeds (and reports a problem with its one-line
    error). Ctrl-C or SIGTERM while waiting stops the child."""
    uncached = getattr(embedder, "uncached", None)
    if uncached is None or not can_fork():
        return False
    missing = uncached(texts)
    if not missing:
        return False
    child = multiprocessing.get_context("fork").Process(
        target=_fill_cache, args=(embedder, missing), name="embed", daemon=True)
    child.start()
    try:
        child.join()
    finally:
        if child.is_alive():
            child.terminate()
            child.join()
    return child.exitcode == 0


def _fill_cache(embedder: Any, texts: list[str]) -> None:
    """The child of :func:`encode_aside`: a failure is left to the parent to report."""
    try:
        embedder.encode(texts)
    except BaseException:  # noqa: BLE001 - the parent embeds again and reports it
        os._exit(1)


def map_methods(names: Sequence[str], work: Callable[[str], Any], workers: int,
                first: Collection[str] = (), ready: Callable[[], bool] | None = None
                ) -> Iterator[tuple[str, Any]]:
    """``(name, work(name))`` for every (unique) name, in order.

    With ``workers`` > 1 (and :func:`can_fork`), ``work`` runs in that many forked
    processes, each taking the next method when it is free, the methods in ``first`` (slow
    to start) before the others; its results must pickle. ``ready`` is asked before each
    method started here and every :data:`CHECK_EVERY` seconds while workers replay: an
    exception it raises stops the replay, and until it says True the methods replay here,
    one after another (the workers would take the cores from whatever it waits for).
    Leaving the iteration early (a ``break``, ``close()``, an exception) stops the workers.

    Every method replays with one BLAS thread (:func:`one_blas_thread`), here or in a
    worker.
    """
    with one_blas_thread():
        yield from _map_methods(names, work, workers, first, ready)


def one_blas_thread() -> Any:
    """A context in which this process's BLAS (and the workers forked in it) use one thread.

    Two reasons. Side by side, each worker's BLAS would start a thread per core, and the
    threads of two workers wait for each other's cores: a warm run of the PEPs corpus took
    193 s with them, 135 s without (the products are small: a query against a few thousand
    rows). And the bits: OpenBLAS's multi-threaded product of a query with a large index
    rounds differently in the last bit from its single-threaded one, and a sweep's joblib
    workers already run BLAS on one thread, so a single run now gives the same similarities
    as the same configuration in a sweep."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        # its scan of the loaded libraries runs Python in ctypes callbacks, which would
        # swallow a Ctrl-C or SIGTERM arriving then (printed, not raised): they wait for it
        with signals_held():
            _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


_BLAS: Any = None  # the BLAS libraries found (threadpoolctl.ThreadpoolController), once


def _map_methods(names: Sequence[str], work: Callable[[str], Any], workers: int,
                 first: Collection[str], ready: Callable[[], bool] | None
                 ) -> Iterator[tuple[str, Any]]:
    parallel = workers > 1 and can_fork()
    todo = list(names)
    while todo:
        go = True if ready is None else ready()
        if parallel and go and len(todo) > 1:
            break
        name = todo.pop(0)
        yield name, work(name)
    if not todo:
        return
    global _work
    _work = work
    order = sorted(todo, key=lambda n: n not in first)  # stable: the rest keep their order
    ctx = multiprocessing.get_context("fork")
    procs: list[Any] = []
    conns: list[Any] = []
    busy: dict[Any, tuple[Any, str]] = {}  # connection -> (its worker, the method it replays)
    ending: set[Any] = set()  # the workers told to end
    try:
        for _ in range(min(workers, len(order))):
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(there,), name="method", daemon=True)
            proc.start()
            there.close()
            procs.append(proc)
            conns.append(here)
            name = order.pop(0)
            here.send(name)
            busy[here] = (proc, name)
        arrived: dict[str, Any] = {}
        for want in todo:
            while want not in arrived:
                if ready is not None:
                    ready()
                for conn in connection.wait(list(busy), CHECK_EVERY if ready else None):
                    proc, name = busy.pop(conn)
                    try:
                        ok, result = conn.recv()
                    except EOFError:
                        proc.join()
                        raise RuntimeError(f"the worker replaying {name} ended (exit code "
                                           f"{proc.exitcode}) before it returned") from None
                    if not ok:
                        raise result
                    arrived[name] = result
                    if order:
                        nxt = order.pop(0)
                        conn.send(nxt)
                        busy[conn] = (proc, nxt)
                    else:
                        conn.send(None)  # no more work: the worker ends
                        ending.add(proc)
            yield want, arrived.pop(want)
    finally:
        _work = None
        # each worker has a pipe of its own, so one killed halfway through sending leaves
        # no lock held (a Pool's shared result queue did: its terminate() then hung)
        for proc in procs:
            if proc not in ending:  # busy, or waiting for work that will not come
                proc.kill()
        for proc in procs:
            proc.join()
        for conn in conns:
            conn.close()


def _serve(conn: Any) -> None:
    """A worker: replay each method it is sent, send back ``(ok, result or exception)``,
    until it is sent None."""
    _quiet_worker()
    while (name := conn.recv()) is not None:
        try:
            out = (True, _call(name)[1])
        except BaseException as e:  # noqa: BLE001 - raised again in the run's process
            e.add_note(f"(in the worker replaying {name}: {traceback.format_exc()})")
            out = (False, e)
        try:
            conn.send(out)
        except Exception as e:  # noqa: BLE001 - e.g. an exception that does not pickle
            conn.send((False, RuntimeError(f"{name}: {type(e).__name__}: {e}")))


def _call(name: str) -> tuple[str, Any]:
    assert _work is not None
    return name, _work(name)


def _quiet_worker() -> None:
    """The run's process handles Ctrl-C and SIGTERM and stops the workers itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
