"""Real-data robustness end to end: a document with an empty paragraph, a Markdown rule and a
version whose time is earlier than its predecessor's goes through the loader and a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from experiments.results.record import find_results_dirs, read_results

ROOT = Path(__file__).resolve().parents[1]

V1 = ("Data retention\n\n---\n\nCustomer records are kept for 90 days.\n\n \n\n"
      "Questions: privacy team.")
V2 = V1.replace("90 days", "60 days")


def _write(path: Path) -> Path:
    path.mkdir(parents=True)
    corpus = [
        {"doc_id": "retention", "version": 1, "valid_from": "2024-01-10T00:00:00Z",
         "source_type": "policy_doc", "text": V1},
        # git author times are not always in order: v2 carries an earlier time than v1
        {"doc_id": "retention", "version": 2, "valid_from": "2024-01-09T23:00:00Z",
         "source_type": "policy_doc", "text": V2},
        {"doc_id": "rule", "version": 1, "valid_from": "2024-01-05T00:00:00Z", "text": "---"},
    ]
    queries = [{"id": "q1", "text": "How long are customer records kept?",
                "asked_at": "2024-03-01T00:00:00Z", "doc_ids": ["retention"],
                "answer": "60 days", "stale_answers": ["90 days"]}]
    (path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (path / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    return path


def _run(args: list[str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return subprocess.run([sys.executable, "-m", "experiments.run", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def test_rule_empty_paragraph_and_out_of_order_version_run_end_to_end(tmp_path: Path) -> None:
    data = _write(tmp_path / "data")
    out = tmp_path / "out"
    proc = _run(["dataset=jsonl", f"dataset.path={data}", "embedder=hashing",
                 "mlflow.enabled=false", "reembed.n_edits=5", "n_boot=50",
                 "methods=[plain_cosine,smartvector,bm25_lifecycle]", f"results_root={out}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    warned = [line for line in proc.stderr.splitlines() if line.startswith("warning: ")]
    assert len([w for w in warned if "out of order" in w.lower() or "repaired" in w.lower()]) \
        == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    (out,) = find_results_dirs([out])
    pred = pd.read_csv(out / "predictions.csv")
    assert set(pred["method"]) == {"plain_cosine", "smartvector", "bm25_lifecycle"}
    assert len(pred) == 3
    results = read_results(out)
    assert results.corpus.versions == 3 and results.error is None
    # the repaired v2 (one second after v1) is the version in force: the lifecycle methods
    # answer 60 days
    by = pred.set_index("method")["grade"]
    assert by["smartvector"] == "correct" and by["bm25_lifecycle"] == "correct"


def test_strict_mode_rejects_the_out_of_order_version(tmp_path: Path) -> None:
    from experiments.data.dataset import DatasetError, load_dataset

    data = _write(tmp_path / "data")
    try:
        load_dataset(data, strict=True)
    except DatasetError as e:
        assert str(e).startswith("corpus.jsonl:2:") and "\n" not in str(e)
    else:
        raise AssertionError("strict mode accepted an out-of-order version")
