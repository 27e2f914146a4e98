"""Start-up and shutdown costs of the main job (issue 15): the background OpenVINO
conversion, the fast exit, batched MLflow logging and shared BM25 indexes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sigint import ctrl_c_as_in_a_terminal

from experiments.retrievers import bm25
from experiments.retrievers.ledger import ChunkLedger
from smartvector import openvino_backend
from smartvector.embedders import CachedEmbedder, HashingEmbedder

ROOT = Path(__file__).resolve().parents[1]


def test_ensure_export_waits_for_the_background_conversion(tmp_path: Path) -> None:
    identity = "cd" * 32
    final = openvino_backend.export_dir(identity, tmp_path)
    script = textwrap.dedent(f"""
        import os, time
        time.sleep(0.5)
        os.makedirs({str(final)!r} + ".tmp")
        open(os.path.join({str(final)!r} + ".tmp", "model.xml"), "w").write("<xml/>")
        os.rename({str(final)!r} + ".tmp", {str(final)!r})
    """)
    openvino_backend._BACKGROUND[final] = subprocess.Popen([sys.executable, "-c", script])

    def never(model_dir: Path, dest: Path) -> None:
        raise AssertionError("converted again although the background conversion succeeded")

    assert openvino_backend.ensure_export(tmp_path, identity, tmp_path, never) == final
    assert final not in openvino_backend._BACKGROUND
    # the IR exists now: nothing to start
    assert not openvino_backend.start_export(tmp_path, identity, tmp_path)


def test_a_failed_background_conversion_is_redone_in_process(tmp_path: Path) -> None:
    identity = "ef" * 32
    final = openvino_backend.export_dir(identity, tmp_path)
    openvino_backend._BACKGROUND[final] = subprocess.Popen(
        [sys.executable, "-c", "raise SystemExit(1)"])
    calls = []

    def fake(model_dir: Path, dest: Path) -> None:
        calls.append(dest)
        (dest / "model.xml").write_text("<xml/>")

    assert openvino_backend.ensure_export(tmp_path, identity, tmp_path, fake) == final
    assert len(calls) == 1 and (final / "model.xml").is_file()


def test_the_conversion_child_is_quiet_on_failure(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "smartvector.openvino_backend", str(tmp_path / "no-model"),
         "ab" * 32, str(tmp_path / "exports")],
        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert not any((tmp_path / "exports").glob("*/model.xml"))


def test_cache_knows_whether_it_holds_the_model(tmp_path: Path) -> None:
    cache = CachedEmbedder(HashingEmbedder(), tmp_path / "c.sqlite")
    assert not cache.holds_any()
    cache.encode(["one text"])
    assert cache.holds_any()
    assert not CachedEmbedder(HashingEmbedder(seed=1), tmp_path / "c.sqlite").holds_any()


def test_exit_now_flushes_runs_atexit_and_stops_thread_pools(tmp_path: Path) -> None:
    marker = tmp_path / "atexit.txt"
    script = textwrap.dedent(f"""
        import atexit, sys
        from concurrent.futures import ThreadPoolExecutor
        from experiments.run import exit_now
        pool = ThreadPoolExecutor(2)
        assert pool.submit(lambda: 41 + 1).result() == 42
        atexit.register(lambda: open({str(marker)!r}, "w").write("ran"))
        print("buffered stdout", end="")
        sys.stderr.write("buffered stderr")
        exit_now(0)
        print("never")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "buffered stdout" and out.stderr.endswith("buffered stderr")
    assert marker.read_text() == "ran"


def test_exit_now_from_ends_only_that_files_top_level_exit_quickly(tmp_path: Path) -> None:
    """The wrapped ``sys.exit``: from the named file's top level it runs the atexit handlers,
    flushes and exits with the code, tearing nothing down (an object's ``__del__`` would
    run at teardown); from anywhere else it raises ``SystemExit`` as before."""
    marker, main = tmp_path / "atexit.txt", tmp_path / "fake_main.py"
    main.write_text(textwrap.dedent(f"""
        import atexit, sys
        from experiments.resilience import exit_now_from

        class Torn:
            def __del__(self, _write=sys.stdout.write):  # (builtins are gone at teardown)
                _write("torn down")

        kept = Torn()
        atexit.register(lambda: open({str(marker)!r}, "w").write("ran"))
        exit_now_from("fake_main.py")
        exit_now_from("fake_main.py")  # idempotent: wrapped once

        def inner():
            try:
                sys.exit(5)
            except SystemExit as e:
                print("raised", e.code)

        inner()
        print("buffered", end="")
        sys.exit(3)
    """))
    out = subprocess.run([sys.executable, str(main)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 3, out.stderr
    assert out.stdout == "raised 5\nbuffered"  # no "torn down": no module teardown
    assert marker.read_text() == "ran"


@pytest.mark.parametrize("quick", [True, False])
def test_joblib_workers_exit_without_teardown(tmp_path: Path, quick: bool) -> None:
    """A loky worker in which :func:`quick_worker_exit` ran ends without tearing its modules
    down; one in which it did not tears down (the control)."""
    marker = tmp_path / "teardown.txt"
    (tmp_path / "job.py").write_text(textwrap.dedent(f"""
        from experiments.resilience import quick_worker_exit

        class Torn:
            def __del__(self, _open=open):  # (builtins are gone at teardown)
                _open({str(marker)!r}, "a").write("torn down")

        kept = []

        def work(i):
            if {quick!r}:
                quick_worker_exit()
            kept.append(Torn())
            return i * 2
    """))
    script = textwrap.dedent("""
        from joblib import Parallel, delayed
        import job
        assert Parallel(n_jobs=2)(delayed(job.work)(i) for i in range(4)) == [0, 2, 4, 6]
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120,
                         env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"})
    assert out.returncode == 0, out.stderr
    assert marker.exists() != quick


def _ledger(texts: list[str]) -> ChunkLedger:
    led = ChunkLedger()
    led.texts.extend(texts)
    return led


def test_bm25_prefix_tokens_equal_bm25s_tokenize_of_the_prefix() -> None:
    """Each text tokenized once, yet every prefix gets the ids and vocabulary that
    ``bm25s.tokenize`` gives it (first appearance order)."""
    import bm25s

    tokens = bm25._PrefixTokens()
    for n in range(1, len(_BM25_TEXTS) + 1):
        tokens.extend(_BM25_TEXTS[:n])
        want = bm25s.tokenize(_BM25_TEXTS[:n], stopwords="en", show_progress=False)
        got = tokens.prefix(n)
        assert got.ids == want.ids and list(got.vocab.items()) == list(want.vocab.items())
        assert tokens.vocab_size(n) == len(want.vocab)
    assert tokens.extend(_BM25_TEXTS) == []  # nothing new
    assert len(tokens.ids) == len(_BM25_TEXTS)


_BM25_TEXTS = ["Passwords rotate every ninety days.", "", "The cafeteria opens at eight; the "
               "cafeteria closes at six.", "and the of", "Remote work: two days a week",
               "passwords MUST be long, passwords must be new", "x y z", "eight days",
               "days days days of remote passwords", "Cafeteria", "ninety-two new passwords"]


def _bm25s_scores(texts: list[str], query: str, k1: float, b: float) -> np.ndarray:
    """What bm25s's own index of ``texts`` scores ``query`` (the reference)."""
    import bm25s

    fresh = bm25s.BM25(k1=k1, b=b)
    fresh.index(bm25s.tokenize(texts, stopwords="en", show_progress=False),
                show_progress=False)
    q = [w for w in bm25s.tokenize([query], stopwords="en", return_ids=False,
                                   show_progress=False)[0] if w in fresh.vocab_dict]
    return np.asarray(fresh.get_scores(q), dtype=np.float64) if q else np.zeros(len(texts))


@pytest.mark.parametrize(("k1", "b"), [(1.5, 0.75), (1.2, 0.3), (0.0, 1.0), (2.0, 0.0)])
def test_bm25_scores_equal_bm25s_index_of_every_prefix_bit_for_bit(k1: float, b: float
                                                                    ) -> None:
    """The postings give, for every prefix of a growing ledger and queries with repeated,
    unknown and not-yet-seen words, exactly the float scores of bm25s's index of that
    prefix, including prefixes asked out of order (time travel) and after growth."""
    queries = ["passwords cafeteria days", "days days passwords", "unknown words only",
               "remote work", "new passwords ninety", "cafeteria", "the of and"]
    led = _ledger([])
    index = bm25.BM25Index(led, k1, b)
    checked = 0
    for grow in range(1, len(_BM25_TEXTS) + 1):
        led.texts[:] = _BM25_TEXTS[:grow]
        for n in (grow, 1, max(1, grow // 2), grow):  # the newest prefix, then older ones
            for query in queries:
                got = index.scores(query, n)
                want = _bm25s_scores(_BM25_TEXTS[:n], query, k1, b)
                assert got.dtype == np.float64 and got.shape == (n,)
                assert np.array_equal(got, want), (n, query)
                checked += int(want.any())
    assert checked > 50  # (most comparisons are of nonzero scores)
    assert index.scores("passwords", 0).shape == (0,)


def test_bm25_scores_equal_bm25s_on_real_policy_paragraphs() -> None:
    """Longer texts (the committed site-policy corpus's first paragraphs: lengths and
    frequencies as the real corpus has them) at several prefixes."""
    import gzip
    import json

    path = ROOT / "datasets" / "site_policy" / "versions.jsonl.gz"
    paragraphs: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            paragraphs += [p for p in json.loads(line)["text"].split("\n\n") if p.strip()]
            if len(paragraphs) >= 300:
                break
    led = _ledger([])
    index = bm25.BM25Index(led, 1.5, 0.75)
    queries = [" ".join(paragraphs[i].split()[:12]) for i in (5, 100, 250)]
    matched = 0
    for n in (40, 300, 120):
        led.texts[:] = paragraphs[:max(n, len(led.texts))]
        for query in queries:
            want = _bm25s_scores(paragraphs[:n], query, 1.5, 0.75)
            assert np.array_equal(index.scores(query, n), want), (n, query)
            matched += int(np.count_nonzero(want))
    assert matched > 100


def test_tracker_batches_params_and_metrics(tmp_path: Path) -> None:
    from experiments.tracking import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "startup", tmp_path / "artifacts")
    params = {f"p{i:03d}": i for i in range(230)}
    metrics = {f"m{i:04d}": float(i) / 7 for i in range(1200)}
    with tracker.run("batched", {"kind": "test"}) as run:
        tracker.log_batch(params, metrics)
    with tracker.run("nested-parent", {}):
        with tracker.run("child", {"x": "1"}, nested=True) as child:
            tracker.log_batch({"only": "params"})
    got = tracker.client.get_run(run.info.run_id).data
    assert got.params == {k: str(v) for k, v in params.items()}
    assert got.metrics == metrics
    assert got.tags["kind"] == "test" and "mlflow.source.name" in got.tags
    data = tracker.client.get_run(child.info.run_id).data
    assert data.params == {"only": "params"} and data.tags["x"] == "1"


def test_a_methods_nested_run_has_its_own_params_and_no_other_methods() -> None:
    from experiments.tracking import method_params

    params = {"seed": 0, "store.pool": 50, "methods.smartvector.kind": "smartvector",
              "methods.smartvector.pool": 50, "methods.smartvector_pool1.kind": "smartvector",
              "methods.smartvector_pool1.pool": 1, "methods.bm25.k1": 1.2}
    assert method_params(params, "smartvector") == {
        "seed": 0, "store.pool": 50, "methods.smartvector.kind": "smartvector",
        "methods.smartvector.pool": 50}
    assert method_params(params, "smartvector_pool1") == {
        "seed": 0, "store.pool": 50, "methods.smartvector_pool1.kind": "smartvector",
        "methods.smartvector_pool1.pool": 1}
    assert method_params(params, "oracle") == {"seed": 0, "store.pool": 50}


_INTERRUPTED_LOAD = """
    import os, signal, sys
    import numba.core.codegen as codegen
    from experiments.resilience import hold_signals_in_numba_loads, sigterm_as_interrupt

    compiled = codegen.CPUCodeLibrary._object_compiled_hook.__func__
    sent = []

    def interrupted(cls, ll_module, buf):
        # one signal arrives while llvmlite calls numba back through ctypes, and its
        # handler runs there (the first kernel loads of a run call this)
        if not sent:
            sent.append(os.kill(os.getpid(), signal.{signal}))
            sum(range(10_000))
        return compiled(cls, ll_module, buf)

    codegen.CPUCodeLibrary._object_compiled_hook = classmethod(interrupted)
    if {hold}:
        hold_signals_in_numba_loads()
    from numba import njit

    @njit
    def plus_one(x):
        return x + 1

    with sigterm_as_interrupt():
        try:
            plus_one(1)
            print("went on", flush=True)
        except KeyboardInterrupt as e:
            print(f"interrupted by {{type(e).__name__}}", flush=True)
    print("compiled:", plus_one(2))
"""


@pytest.mark.parametrize("sig, raised", [("SIGINT", "KeyboardInterrupt"),
                                         ("SIGTERM", "Terminated")])
def test_an_interrupt_during_a_kernel_load_is_not_lost(sig: str, raised: str) -> None:
    """Ctrl-C or SIGTERM while numba loads or compiles a kernel takes effect once the
    compiler lock is released, instead of vanishing in llvmlite's ctypes callback."""
    script = textwrap.dedent(_INTERRUPTED_LOAD.format(signal=sig, hold=True))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, preexec_fn=ctrl_c_as_in_a_terminal)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"interrupted by {raised}", "compiled: 3"]
    assert "Exception ignored" not in out.stderr


def test_without_the_hold_the_interrupt_was_lost() -> None:
    """What the hold is for (numba 0.6x, llvmlite 0.4x): the interrupt is printed as
    "Exception ignored" and the program goes on."""
    script = textwrap.dedent(_INTERRUPTED_LOAD.format(signal="SIGINT", hold=False))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, preexec_fn=ctrl_c_as_in_a_terminal)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["went on", "compiled: 3"]
    assert "Exception ignored" in out.stderr and "KeyboardInterrupt" in out.stderr


def test_signal_hold_nests_and_delivers_at_the_outermost_leave() -> None:
    script = textwrap.dedent("""
        import os, signal
        from experiments.resilience import SignalHold
        hold = SignalHold()
        hold.enter(); hold.enter()
        os.kill(os.getpid(), signal.SIGINT)
        hold.leave()
        print("held after the inner leave", flush=True)
        try:
            hold.leave()
            print("lost")
        except KeyboardInterrupt:
            print("raised")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        hold.leave()  # unmatched: nothing happens
        only_int = SignalHold((signal.SIGINT,))
        only_int.enter()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        only_int.leave()
        print("done")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, timeout=60, preexec_fn=ctrl_c_as_in_a_terminal)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["held after the inner leave", "raised", "done"]


def test_a_second_signal_is_not_held() -> None:
    script = textwrap.dedent("""
        import os, signal
        from experiments.resilience import SignalHold
        hold = SignalHold()
        hold.enter(); hold.enter()
        os.kill(os.getpid(), signal.SIGINT)
        print("first held", flush=True)
        try:
            os.kill(os.getpid(), signal.SIGINT)
            print("second held")
        except KeyboardInterrupt:
            print("second raised at once")
        assert not hold.held
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, timeout=60, preexec_fn=ctrl_c_as_in_a_terminal)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["first held", "second raised at once"]


def test_joblib_workers_collect_in_full_once_a_minute_not_after_every_job(
        tmp_path: Path) -> None:
    """loky, without psutil, runs a full garbage collection after a task whenever a second
    has passed since its last: in a worker where :func:`fewer_full_collections` ran, every
    :data:`WORKER_FULL_GC_EVERY` seconds. Counted with ``gc.callbacks`` over eight jobs of
    0.55 s on two workers: the control's collect after their first and third jobs."""
    from experiments.resilience import WORKER_FULL_GC_EVERY

    (tmp_path / "job.py").write_text(textwrap.dedent("""
        import gc, os, time
        from experiments.resilience import fewer_full_collections

        full = []
        gc.callbacks.append(lambda phase, info: phase == "start" and info["generation"] == 2
                            and full.append(1))

        def work(fewer):
            if fewer:
                fewer_full_collections()
            from joblib.externals.loky import process_executor as loky
            time.sleep(0.55)
            return os.getpid(), len(full), loky._MEMORY_LEAK_CHECK_DELAY, loky._USE_PSUTIL
    """))
    script = textwrap.dedent("""
        import json, sys
        from joblib import Parallel, delayed
        import job
        fewer = sys.argv[1] == "1"
        print(json.dumps(Parallel(n_jobs=2, backend="loky")(
            delayed(job.work)(fewer) for _ in range(8))))
    """)

    def run(fewer: bool) -> list[list]:
        out = subprocess.run([sys.executable, "-c", script, "1" if fewer else "0"],
                             capture_output=True, text=True, cwd=tmp_path, timeout=120,
                             env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"})
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    fewer, control = run(True), run(False)
    assert len({pid for pid, *_ in fewer}) == 2  # the jobs ran in workers, not here
    if fewer[0][3]:  # psutil installed: loky collects on memory growth only, left alone
        assert {delay for *_, delay, _ in fewer} == {1.0}
        return
    assert {delay for _, _, delay, _ in fewer} == {WORKER_FULL_GC_EVERY}
    assert {delay for _, _, delay, _ in control} == {1.0}
    # the most full collections a job saw before it ran: loky's first (after a worker's
    # first job), and in the control one more after every second job since
    assert max(seen for _, seen, *_ in fewer) <= 1
    assert max(seen for _, seen, *_ in control) >= 2


def test_an_interrupt_wrapped_by_set_name_is_still_an_interrupt() -> None:
    """An interrupt raised while a class body binds its attributes (a lazily imported module
    defining a dataclass when SIGTERM came) reaches the run as Python 3.11's RuntimeError
    "Error calling __set_name__": the run still takes it for the interrupt it is."""
    from experiments.resilience import Terminated, interrupt_of

    class Interrupted:
        def __set_name__(self, owner: type, name: str) -> None:
            raise Terminated("SIGTERM")

    with pytest.raises(BaseException) as raised:
        class Defined:  # noqa: F841 - defining it is the point
            attr = Interrupted()
    if isinstance(raised.value, RuntimeError):  # Python 3.11 (3.12 raises it unwrapped)
        assert "__set_name__" in str(raised.value)
    assert isinstance(interrupt_of(raised.value), Terminated)
    ctrl_c = KeyboardInterrupt()
    assert interrupt_of(ctrl_c) is ctrl_c
    assert interrupt_of(RuntimeError("no cause")) is None
    try:
        raise RuntimeError("from another error") from ValueError("x")
    except RuntimeError as e:
        assert interrupt_of(e) is None
