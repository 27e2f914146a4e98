"""The harness benchmark's bookkeeping: per-study times read from ``experiments.studies.paper``'s
output and shown in the summary."""

from __future__ import annotations

from benchmarks.bench_harness import study_times
from benchmarks.summary import harness_section


def test_study_times_are_the_last_json_object_printed() -> None:
    out = ('$ python -m experiments.run -m +experiment=table1\n{"not": "this"}\n'
           'weights chosen on the development split: {"semantic": 0.35}\n'
           '{\n  "table1": 12.5,\n  "real_peps": 3.0,\n  "total": 15.5\n}\n')
    assert study_times(out) == {"table1": 12.5, "real_peps": 3.0, "total": 15.5}
    assert study_times("no timings\n") is None
    assert study_times("") is None
    assert study_times('{\n  "total": 1.0\n') is None  # cut short


def test_summary_lists_each_step_time() -> None:
    machine = {"cpu": "CPU", "cores": 2, "date": "2026-12-01 17:00 UTC"}
    run = {"command": "python -m experiments.studies.paper", "wall_s": 15.5, "load_avg_before": 1.0,
           "load_avg_after": 1.2, "studies_s": {"sweeps": 12.5, "real_peps": 3.0,
                                                "total": 15.5}}
    text = "\n".join(harness_section({"parts": {"paper": {"machine": machine, "cold": run}}}))
    assert ("| paper | cold | `python -m experiments.studies.paper` | 15.5 s | not recorded |"
            in text)
    assert ("paper cold, each step's wall time: sweeps 12.5 s, real_peps 3.0 s; `sweeps` runs "
            "every study of several jobs in one sweep.") in text


def test_summary_shows_cpu_and_cores_busy_where_recorded() -> None:
    machine = {"cpu": "CPU", "cores": 2, "date": "2026-12-02 12:00 UTC"}
    run = {"command": "python -m experiments.studies.paper", "wall_s": 20.0, "cpu_s": 30.0,
           "cores_busy": 1.5, "load_avg_before": 1.0, "load_avg_after": 1.2,
           "studies_s": {"table1": 16.0, "real_peps": 4.0, "total": 20.0},
           "studies_cpu_s": {"table1": 28.0, "real_peps": 2.0, "total": 30.0}}
    text = "\n".join(harness_section({"parts": {"paper": {"machine": machine, "cold": run}}}))
    assert ("| paper | cold | `python -m experiments.studies.paper` | 20.0 s | 30.0 s (1.50) |"
            in text)
    assert ("paper cold, each step's wall time (CPU, cores busy): table1 16.0 s "
            "(28.0 s, 1.75), real_peps 4.0 s (2.0 s, 0.50).") in text


def test_children_cpu_counts_a_finished_child() -> None:
    """A child that burns ~0.3 s of CPU adds at least that much to ``children_cpu_s``."""
    import subprocess
    import sys

    from benchmarks.bench_harness import children_cpu_s

    before = children_cpu_s()
    subprocess.run([sys.executable, "-c",
                    "import time\nt = time.process_time()\n"
                    "while time.process_time() - t < 0.3: pass"], check=True)
    assert children_cpu_s() - before >= 0.3


def test_consolidation_benchmark_counts_the_queries_it_searched(monkeypatch) -> None:
    """``timed_passes`` reports the queries the pass searched (on HNSW, from
    ``_CLAIMS_FIRST`` new vectors up, only those whose texts state a quantity) and the
    collector's time, leaves the index's methods as they were, and the summary shows both."""
    from benchmarks.bench_consolidation import timed_passes
    from benchmarks.common import machine
    from benchmarks.summary import consolidation_section
    from benchmarks.workload import ingest, make_corpus, new_store
    from smartvector import consolidation

    monkeypatch.setattr(consolidation, "_CLAIMS_FIRST", 1)
    corpus = make_corpus(1500, seed=0)
    store = new_store(threads=1)
    ingest(corpus, store)
    live = [r for r in range(len(store)) if not store.columns["superseded_at"][r] <= 1e300]
    stating = sum(bool(consolidation.claims(store.texts[r])) for r in live)
    passes, pairs = timed_passes(store, lambda _: None)
    first = passes["initial"]
    assert first["report"]["promoted"] == len(live) > stating == first["index_search_queries"]
    assert passes["next"]["index_search_queries"] == 0 and first["gc_s"] >= 0
    assert pairs and "search" not in vars(store.index) and "get_vectors" not in vars(store.index)
    size = {"n": len(store), "ingest_s": 1.0, "full_s": 1.0, "passes": passes}
    text = "\n".join(consolidation_section({
        "machine": {**machine(), "command": "python -m benchmarks.bench_consolidation"},
        "wall_s": 1.0, "sizes": {"1500": size}}))
    assert f"{first['index_search_queries']:,} of {len(live):,}" in text


def test_keep_leaves_the_parts_directory_and_never_reuses_one(tmp_path, monkeypatch) -> None:
    """``--keep``: the steps run in ``DIR/<part>``, which stays (the reproduction's store
    regenerates the tables from it); a directory already there is refused, not mixed in."""
    import pytest

    from benchmarks import bench_harness

    monkeypatch.setitem(bench_harness.PARTS, "tiny", [
        ("cold", ["-c", "open('made', 'w').write('x')"], True)])
    out = bench_harness.run_part("tiny", lambda _: None, keep=tmp_path)
    assert (tmp_path / "tiny" / "scratch0" / "made").read_text() == "x"
    assert (tmp_path / "tiny" / "scratch0" / "datasets").is_symlink()
    assert out["cold"]["command"].startswith("python -c")
    with pytest.raises(FileExistsError):
        bench_harness.run_part("tiny", lambda _: None, keep=tmp_path)
    done = bench_harness.run_part("tiny", lambda _: None)  # no keep: a temporary directory
    assert done["cold"]["wall_s"] >= 0 and not (tmp_path / "tiny" / "scratch1").exists()
