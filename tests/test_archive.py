"""Packing a study's per-query files: complete, readable back, byte-identical when repeated."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.results.archive import pack, unpack


def _results_dir(root: Path, name: str) -> Path:
    d = root / name
    (d / "runs").mkdir(parents=True)
    (d / "qrels").mkdir()
    (d / "runs" / "m.txt").write_text(f"q1 Q0 a#1 1 2 m\nq1 Q0 b#1 2 1 m\n# {name}\n")
    (d / "qrels" / "relevant.txt").write_text("q1 0 a#1 1\n")
    pd.DataFrame({"query_id": ["q1"], "method": ["m"], "kind": ["current"],
                  "grade": ["correct"], "probability": [0.5], "score": [3.0]}).to_csv(
        d / "predictions.csv", index=False)
    return d


def test_pack_round_trip_and_determinism(tmp_path: Path) -> None:
    dirs = [_results_dir(tmp_path, "fp2"), _results_dir(tmp_path, "fp1")]
    first = pack(dirs, tmp_path / "out" / "study.tar.xz").read_bytes()
    second = pack(list(reversed(dirs)), tmp_path / "again.tar.xz").read_bytes()
    assert first == second
    got = unpack(tmp_path / "again.tar.xz")
    assert sorted(got) == ["fp1", "fp2"]
    assert sorted(got["fp1"]) == ["qrels/relevant.txt", "runs/m.txt", "top1.csv"]
    assert got["fp2"]["runs/m.txt"].endswith("# fp2\n")
    assert got["fp1"]["top1.csv"].splitlines() == ["query_id,method,kind,grade,probability",
                                                    "q1,m,current,correct,0.5"]
