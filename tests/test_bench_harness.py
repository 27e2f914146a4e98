"""The harness benchmark's bookkeeping: per-study times read from ``experiments.paper``'s
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


def test_summary_lists_each_study_time() -> None:
    machine = {"cpu": "CPU", "cores": 2, "date": "2026-12-01 17:00 UTC"}
    run = {"command": "python -m experiments.paper", "wall_s": 15.5, "load_avg_before": 1.0,
           "load_avg_after": 1.2, "studies_s": {"table1": 12.5, "real_peps": 3.0,
                                                "total": 15.5}}
    text = "\n".join(harness_section({"parts": {"paper": {"machine": machine, "cold": run}}}))
    assert "| paper | cold | `python -m experiments.paper` | 15.5 s |" in text
    assert "paper cold, each study's wall time: table1 12.5 s, real_peps 3.0 s." in text
