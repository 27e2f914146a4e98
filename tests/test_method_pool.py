"""Methods replayed in forked worker processes: same results, in order, workers stopped."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from sigint import ctrl_c_as_in_a_terminal

from experiments import method_pool
from experiments import run as runner
from smartvector.embedders import CachedEmbedder, HashingEmbedder

ROOT = Path(__file__).resolve().parents[1]
FAST = ["embedder=hashing", "reembed.n_edits=20", "n_boot=200"]

needs_fork = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                                reason="no fork on this platform")


@pytest.fixture
def forkable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fork even if another test imported torch here: these workers never touch it."""
    monkeypatch.setattr(method_pool, "_FORK_UNSAFE", ())


def _cfg(*overrides: str):
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return compose(config_name="config", overrides=list(overrides))


def _square_with_pid(name: str) -> tuple[int, int]:
    if name == "slow":
        time.sleep(0.2)  # finishes after the next one: results must still come in order
    return len(name) ** 2, os.getpid()


def test_workers_for() -> None:
    cores = method_pool._cores()
    assert 1 <= cores <= (os.cpu_count() or 1)
    assert method_pool.workers_for(0, single_run=True, n_methods=100) == cores
    assert method_pool.workers_for(0, single_run=False, n_methods=100) == 1
    assert method_pool.workers_for(3, single_run=False, n_methods=100) == 3
    assert method_pool.workers_for(8, single_run=True, n_methods=2) == 2
    assert method_pool.workers_for(0, single_run=True, n_methods=0) == 1
    with pytest.raises(ValueError, match="method_workers must be >= 0"):
        method_pool.workers_for(-1, single_run=True, n_methods=3)


@needs_fork
def test_results_in_order_from_other_processes(forkable: None) -> None:
    names = ["slow", "a", "bb", "ccc", "dddd"]
    got = list(method_pool.map_methods(names, _square_with_pid, workers=2))
    assert [n for n, _ in got] == names
    assert [v for _, (v, _) in got] == [16, 1, 4, 9, 16]
    pids = {pid for _, (_, pid) in got}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert not multiprocessing.active_children()


def _start_time(name: str) -> float:
    start = time.monotonic()  # one clock for every process
    time.sleep(0.15)
    return start


@needs_fork
def test_slow_starters_go_first_and_results_stay_in_order(forkable: None) -> None:
    names = ["a", "b", "c", "d", "late"]
    got = list(method_pool.map_methods(names, _start_time, workers=2, first={"late"}))
    assert [n for n, _ in got] == names
    start = dict(got)
    assert start["late"] < start["c"] and start["late"] < start["d"]


@needs_fork
def test_methods_replay_here_until_ready(forkable: None) -> None:
    answers = iter([False, False])  # then True
    got = list(method_pool.map_methods(["a", "bb", "ccc", "dddd"], _square_with_pid,
                                       workers=2, ready=lambda: next(answers, True)))
    pids = [pid for _, (_, pid) in got]
    assert [n for n, _ in got] == ["a", "bb", "ccc", "dddd"]
    assert pids[:2] == [os.getpid()] * 2 and os.getpid() not in pids[2:]


class _Stop(Exception):
    pass


def _one_second(name: str) -> str:
    time.sleep(1.0)
    return name


@needs_fork
@pytest.mark.parametrize("workers", [1, 2])
def test_ready_raising_stops_the_replay(forkable: None, workers: int) -> None:
    calls = 0

    def ready() -> bool:
        nonlocal calls
        calls += 1
        if calls >= 3:
            raise _Stop
        return True

    got = []
    with pytest.raises(_Stop):
        for name, _ in method_pool.map_methods(["a", "b", "c", "d"], _one_second,
                                               workers=workers, ready=ready):
            got.append(name)
    # one at a time: asked before each method, so two finished; side by side: asked
    # before the workers start and every CHECK_EVERY seconds while they work, so stopped
    # long before any method (1 s) finished
    assert got == (["a", "b"] if workers == 1 else [])
    assert not multiprocessing.active_children()


_LEAVE_MID_SEND = """
import time
from experiments import method_pool

def work(name):
    if name == "b":
        time.sleep(0.2)
        return b"x" * 50_000_000  # far more than a pipe holds: its worker blocks sending it
    return name

for name, _ in method_pool.map_methods(["a", "b", "c"], work, workers=2):
    time.sleep(1.0)  # (no one reads the pipe: the worker of "b" is stuck halfway)
    break
import multiprocessing
print("left", len(multiprocessing.active_children()))
"""


@needs_fork
def test_leaving_early_while_a_worker_sends_its_result_does_not_hang() -> None:
    """Stopping at the first method (a failed method stops a run) while another worker is
    halfway through sending a large result that no one reads: the workers still busy are
    killed, not waited for, and the run goes on. (Each worker has a pipe of its own, so the
    kill leaves no lock held. The multiprocessing Pool used before passes this case, since its
    result thread reads on, but its terminate() hung for ever when it killed a worker that
    held the shared result queue's lock: twice in a row, in the full suite, in test_run's
    failing-method test; not reproducible on its own, the window is a few milliseconds.)"""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _LEAVE_MID_SEND], capture_output=True,
                          text=True, timeout=120, check=False,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["left", "0"]


def _fails(name: str) -> str:
    if name == "b":
        raise ValueError("b broke")
    return name


@needs_fork
def test_a_workers_exception_is_raised_here_with_its_traceback(forkable: None) -> None:
    with pytest.raises(ValueError, match="b broke") as caught:
        list(method_pool.map_methods(["a", "b"], _fails, workers=2))
    assert "in the worker replaying b" in "".join(caught.value.__notes__)
    assert not multiprocessing.active_children()


def _dies(name: str) -> str:
    if name == "b":
        os._exit(3)
    return name


@needs_fork
def test_a_worker_that_dies_is_an_error_naming_its_method(forkable: None) -> None:
    with pytest.raises(RuntimeError, match=r"the worker replaying b ended \(exit code 3\)"):
        list(method_pool.map_methods(["a", "b"], _dies, workers=2))
    assert not multiprocessing.active_children()


def test_one_worker_runs_in_this_process() -> None:
    got = list(method_pool.map_methods(["a", "bb"], _square_with_pid, workers=1))
    assert got == [("a", (1, os.getpid())), ("bb", (4, os.getpid()))]


def _blas_threads(_name: str = "") -> list[int]:
    from threadpoolctl import threadpool_info

    return sorted({p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})


@pytest.mark.parametrize("workers", [1, 2])
def test_methods_replay_with_one_blas_thread(forkable: None, workers: int) -> None:
    """Here and in the workers (side by side, more BLAS threads only wait for a core, and a
    sweep's workers already use one: the same bits either way); restored afterwards."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() == [2]
        got = dict(method_pool.map_methods(["a", "b", "c"], _blas_threads, workers))
        assert got == {"a": [1], "b": [1], "c": [1]}
        assert _blas_threads() == [2]


_SCAN_INTERRUPTED = """
import contextlib, ctypes, os, signal, time
import threadpoolctl
from experiments import method_pool

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (see below)

class Scan:  # a ThreadpoolController whose scan is interrupted in a ctypes callback
    def __init__(self):
        def inside():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # (an unheld SIGINT is raised here, inside the callback)
            return 0
        ctypes.CFUNCTYPE(ctypes.c_int)(inside)()
    def limit(self, **_):
        return contextlib.nullcontext()

threadpoolctl.ThreadpoolController = Scan
try:
    method_pool.one_blas_thread()
    print("lost")
except KeyboardInterrupt:
    print("raised")
"""


def test_ctrl_c_during_the_blas_library_scan_is_not_lost() -> None:
    """threadpoolctl finds the BLAS libraries in ctypes callbacks, where a KeyboardInterrupt
    is printed and dropped: a SIGINT arriving during that scan is raised once it is done (in
    a process of its own: the test sends it a real SIGINT)."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", _SCAN_INTERRUPTED], cwd=ROOT, text=True,
                         capture_output=True, timeout=120, check=False,
                         preexec_fn=ctrl_c_as_in_a_terminal)
    assert out.stdout.strip() == "raised", out.stderr[-2000:]


def test_no_fork_while_a_model_runtime_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openvino", sys.modules["os"])  # any module object
    assert not method_pool.can_fork()
    got = list(method_pool.map_methods(["a", "bb"], _square_with_pid, workers=2))
    assert {pid for _, (_, pid) in got} == {os.getpid()}


class _PidEmbedder:
    """A hashing embedder that notes the process it embedded in (in a file: the child's
    notes must reach the test) and can be told to fail."""

    def __init__(self, log: Path, fail: bool = False) -> None:
        self.inner, self.log, self.fail = HashingEmbedder(dim=32), log, fail
        self.name, self.dim = self.inner.name, self.inner.dim

    def encode(self, texts):
        with self.log.open("a") as f:
            f.write(f"{os.getpid()} {len(texts)}\n")
        if self.fail:
            raise RuntimeError("the model is unavailable")
        return self.inner.encode(texts)


@needs_fork
def test_encode_aside_fills_the_cache_in_a_child(tmp_path: Path, forkable: None) -> None:
    """A run that must embed does it in a forked child, the texts in the order and batch its
    own encode would have used; this process then reads them all from the cache, bit for
    bit what it would have computed, and never embeds itself."""
    log = tmp_path / "embedded.log"
    cache = CachedEmbedder(_PidEmbedder(log), tmp_path / "cache.sqlite")
    cache.encode(["already cached"])
    texts = ["b text", "a text", "already cached", "b text", "c text"]
    assert method_pool.encode_aside(cache, texts)
    pid, n = log.read_text().splitlines()[-1].split()
    assert int(pid) != os.getpid() and int(n) == 3  # one call: the three missing texts
    got = cache.encode(texts)
    assert len(log.read_text().splitlines()) == 2  # (nothing embedded here)
    want = HashingEmbedder(dim=32).encode(texts)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert not method_pool.encode_aside(cache, texts)  # all cached: no child
    assert len(log.read_text().splitlines()) == 2


@needs_fork
def test_encode_aside_leaves_failures_and_runtimes_to_the_caller(
        tmp_path: Path, forkable: None, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    failing = CachedEmbedder(_PidEmbedder(tmp_path / "f.log", fail=True), tmp_path / "f.sqlite")
    assert not method_pool.encode_aside(failing, ["x"])
    assert "Traceback" not in capfd.readouterr().err  # the caller's encode reports it
    with pytest.raises(RuntimeError, match="the model is unavailable"):
        failing.encode(["x"])
    assert not method_pool.encode_aside(HashingEmbedder(), ["x"])  # no disk cache: no child
    log = tmp_path / "e.log"
    cache = CachedEmbedder(_PidEmbedder(log), tmp_path / "e.sqlite")
    monkeypatch.setattr(method_pool, "_FORK_UNSAFE", ("openvino",))
    monkeypatch.setitem(sys.modules, "openvino", sys.modules["os"])  # a runtime is loaded
    assert not method_pool.encode_aside(cache, ["x"]) and not log.exists()


@needs_fork
def test_leaving_early_stops_the_workers(forkable: None) -> None:
    results = method_pool.map_methods(["a", "slow", "b", "c"], _square_with_pid, workers=2)
    assert next(results)[0] == "a"
    results.close()
    assert not multiprocessing.active_children()


@needs_fork
def test_parallel_run_equals_sequential(tmp_path: Path, forkable: None,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    methods = "methods=[plain_cosine,smartvector,time_weighted,bm25,hybrid_rrf]"
    pids = tmp_path / "pids"
    pids.mkdir()
    real = runner.replay

    def replay(ds, retriever, *args, **kwargs):
        (pids / retriever.name).write_text(str(os.getpid()))
        return real(ds, retriever, *args, **kwargs)

    monkeypatch.setattr(runner, "replay", replay)
    out = {}
    for w in (1, 2):
        cfg = _cfg(*FAST, methods, f"method_workers={w}")
        out[w] = tmp_path / f"w{w}"
        out[w].mkdir()
        metrics = runner.evaluate_run(cfg, runner.validate(cfg), out[w])
        used = {p.read_text() for p in pids.iterdir()}
        assert (used == {str(os.getpid())}) == (w == 1)
        for m in metrics["methods"].values():
            assert m["timing"]["latency_p50_ms"] > 0
    for f in ("predictions.csv", "run.csv"):
        assert (out[1] / f).read_bytes() == (out[2] / f).read_bytes()
    import json

    a, b = (json.loads((out[w] / "metrics.json").read_text()) for w in (1, 2))
    for m in a["methods"]:
        assert a["methods"][m]["quality"] == b["methods"][m]["quality"]
    assert list(a["methods"]) == list(b["methods"])
    assert a["corpus"] == b["corpus"] and a["reembed"] == b["reembed"]


@needs_fork
def test_reembed_costs_computed_beside_the_methods(tmp_path: Path, forkable: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """With workers, the re-embedding costs are one more task of the pool (in a worker, not
    after the methods in the run's process); the costs are those of the direct call."""
    real = runner.edit_costs
    pid = tmp_path / "pid"

    def edit_costs(*args, **kwargs):
        pid.write_text(str(os.getpid()))
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "edit_costs", edit_costs)
    cfg = _cfg(*FAST, "methods=[plain_cosine,bm25]", "method_workers=2")
    metrics = runner.evaluate_run(cfg, runner.validate(cfg), tmp_path)
    assert int(pid.read_text()) != os.getpid()
    ds = runner.split_queries(runner.load_data(cfg, tmp_path), cfg.query_split)
    assert metrics["reembed"] == real(ds, 20, cfg.seed, cfg.reembed.window, cfg.reembed.overlap)
    assert metrics["reembed"]["reembed_surgical"] == 1.0
    assert list(metrics["methods"]) == ["plain_cosine", "bm25"] and "error" not in metrics


@needs_fork
@pytest.mark.parametrize("workers", [1, 2])
def test_reembed_failure_keeps_the_methods(tmp_path: Path, forkable: None, workers: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def edit_costs(*args, **kwargs):
        raise ValueError("no document to edit")

    monkeypatch.setattr(runner, "edit_costs", edit_costs)
    cfg = _cfg(*FAST, "methods=[plain_cosine,bm25]", f"method_workers={workers}")
    metrics = runner.evaluate_run(cfg, runner.validate(cfg), tmp_path)
    assert metrics["error"] == {"phase": "re-embedding study",
                                "message": "no document to edit"}
    assert list(metrics["methods"]) == ["plain_cosine", "bm25"] and metrics["reembed"] == {}


def test_negative_workers_rejected_with_one_line() -> None:
    with pytest.raises(runner.ConfigError, match="method_workers must be >= 0"):
        runner.validate(_cfg(*FAST, "method_workers=-1"))


def test_workers_do_not_change_the_fingerprint() -> None:
    a, b = _cfg(*FAST), _cfg(*FAST, "method_workers=2")
    assert runner.config_fingerprint(a, None) == runner.config_fingerprint(b, None)


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text in cmdline.read_bytes().decode(errors="replace"):
                found.append(int(cmdline.parent.name))
        except OSError:  # gone meanwhile
            pass
    return found


@needs_fork
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_ctrl_c_while_methods_replay_side_by_side_leaves_no_process(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the whole process group) during the methods: the one-line message,
    exit 130, nothing written, and no worker (or logging) process left behind."""
    import subprocess

    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "experiments.run", "embedder=hashing", "n_boot=100",
         "method_workers=2", f"hydra.run.dir={out}",
         f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db",
         f"mlflow.artifact_location={tmp_path}/artifacts"],
        cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, preexec_fn=ctrl_c_as_in_a_terminal)
    deadline = time.time() + 120
    while not (out / "dataset" / "queries.jsonl").exists() and proc.poll() is None:
        assert time.time() < deadline
        time.sleep(0.02)
    time.sleep(0.5)  # into the methods (14 of them take a few seconds)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    assert "interrupted" in err
    assert not (out / "metrics.json").exists()
    deadline = time.time() + 10
    while _processes_mentioning(str(tmp_path)) and time.time() < deadline:
        time.sleep(0.1)
    assert not _processes_mentioning(str(tmp_path))


def test_a_ctrl_c_while_the_logging_child_starts_ends_it_quietly() -> None:
    """The run's logging child gets a Ctrl-C sent at once after it was started (the process
    group's, as a terminal sends it): it ends with 130 and prints nothing. SIGINT arriving
    while its interpreter started ended it with "Fatal Python error" or a traceback on the
    run's stderr (or silently by the signal), depending on the moment."""
    import subprocess

    script = (  # (SIGINT handled as Python does by default, even if pytest runs with it
        # ignored, as a shell's background job does: the child would then ignore it too)
        "import os, signal\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from experiments import log_worker\n"
        "proc = log_worker._spawn()\n"
        "os.kill(proc.pid, signal.SIGINT)\n"
        "proc.stdin.close()\n"
        "print(proc.wait())\n")
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == "130" and done.stderr == ""


def test_the_logging_child_takes_an_interrupt_wrapped_by_set_name_for_one() -> None:
    """A Ctrl-C while the child's lazy imports define a class reaches it as Python 3.11's
    RuntimeError "Error calling __set_name__": it still ends with 130 and no traceback."""
    import subprocess

    script = (
        "import io, sys\n"
        "from experiments import log_worker\n"
        "class Interrupted:\n"
        "    def __set_name__(self, owner, name):\n"
        "        raise KeyboardInterrupt\n"
        "def serve(*args):\n"
        "    class Defined:\n"
        "        attr = Interrupted()\n"
        "log_worker._serve = serve\n"
        "sys.stdin = io.StringIO('{\"tracking_uri\": \"x\"}\\n')\n"
        "print('exit', log_worker.main(), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == "exit 130\n"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_ctrl_c_during_the_start_up_ends_the_run_cleanly(tmp_path: Path) -> None:
    """Ctrl-C while the run imports and Hydra composes its configuration (as soon as the
    logging process exists, which the run starts at its first line): it acts when the run
    starts its work, with the one-line message and exit 130 (it printed a traceback, or
    broke OmegaConf's half-built configuration into an unrelated error)."""
    import subprocess

    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "experiments.run", "embedder=hashing", "n_boot=100",
         f"hydra.run.dir={out}", f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db",
         f"mlflow.artifact_location={tmp_path}/artifacts"],
        cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, preexec_fn=ctrl_c_as_in_a_terminal)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.time() + 60
    while proc.poll() is None and not children.read_text().split():
        assert time.time() < deadline
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "interrupted (Ctrl-C)" in err
    assert not (out / "metrics.json").exists()
