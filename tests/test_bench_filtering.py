"""The filtering benchmark: its estimate of a compiled filter's cost and every design's pool
on a small knowledge base."""

from __future__ import annotations

import argparse

import pytest

from benchmarks import bench_filtering
from benchmarks.summary import filtering_section


def test_work_estimate_subtracts_each_callback_at_the_allow_all_cost() -> None:
    # an allow-all callback adds 20 us over 100 calls: 0.2 us each; 300 calls in 110 us
    # leave 110 - 60 = 50 us of index work
    assert bench_filtering.work_estimate(40.0, 60.0, 100.0, 110.0, 300.0) == pytest.approx(50.0)
    assert bench_filtering.work_estimate(40.0, 40.0, 100.0, 55.0, 300.0) == pytest.approx(55.0)


def test_every_design_finds_the_visible_pool_and_the_summary_shows_it() -> None:
    args = argparse.Namespace(seed=0, queries=20, threads=1)
    r = bench_filtering.bench_size(2000, args, lambda *_: None)
    assert r["live_rows"] + r["ended_rows"] == r["n"] and r["ended_rows"] > 0
    for p in bench_filtering.POOLS:
        pool = r["pools"][str(p)]
        assert min(pool["recall_at_pool"].values()) >= 0.95
        # a visibility filter is called more often than an allow-all one: hnswlib keeps
        # searching until it holds ef visible rows
        assert (pool["time_travel"]["filter_calls_visible"]
                > pool["time_travel"]["filter_calls_allow_all"])
    assert r["memory"]["live_copy_bytes_per_store_row"] < r["memory"]["index_bytes_per_row"]
    text = "\n".join(filtering_section({
        "machine": {"command": "python -m benchmarks.bench_filtering", "cpu": "x", "cores": 2,
                    "ram_gib": 1, "python": "3", "numpy": "2", "hnswlib": "0.8", "date": "d",
                    "load_avg_at_start": [0.0]},
        "wall_s": 1.0, "params": {"ef_search": 64}, "sizes": {"2000": r}}))
    assert "| 2,000 | 50 |" in text and "| 2,000 | 100 |" in text
