"""Your own version history through the shared deriver (``dataset=history``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.data import history
from experiments.data.dataset import DatasetError, load_dataset
from experiments.data.deriver import read_versions


def _write(tmp_path: Path, rows: list[tuple[str, int, str, str]]) -> Path:
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps({"doc_id": d, "version": v, "committed_at": t,
                                        "text": x}) + "\n" for d, v, t, x in rows))
    return path


def test_questions_from_labelled_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, [
        ("svc", 1, "2024-01-01T00:00:00+00:00",
         "Billing API\nRate limit: 100/min\nOwner: ana\nRegion: eu-1"),
        ("svc", 2, "2024-06-01T00:00:00+00:00",
         "Billing API\nRate limit: 250/min\nOwner: ana\nRegion: eu-1"),
        ("svc", 3, "2024-09-01T00:00:00+00:00",
         "Billing API\nRate limit: 250/min\nOwner: bo\nRegion: eu 1"),
    ])
    out = history.write_dataset(history.generate(history.HistoryConfig(path=str(path))),
                                tmp_path / "ds")
    ds = load_dataset(out)
    assert ds.corpus[0].meta["title"] == "Billing API"
    facts = {q.meta["fact"] for q in ds.queries}
    assert facts == {"Owner", "Rate limit"}
    for q in ds.queries:
        assert "Billing API" in q.text and q.text.endswith("?")
    # eu-1 -> eu 1 is a change of format only: not a fact (either line gives the answer)
    now = [q for q in ds.queries if q.meta["fact"] == "Rate limit" and q.kind == "current"]
    assert now and all(q.answer == "Rate limit: 250/min" for q in now)
    assert all(q.stale_answers == ("Rate limit: 100/min",) for q in now)


def test_bad_history_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"doc_id": "a", "version": 1, "text": "x"}\n')
    with pytest.raises(DatasetError, match=r"^bad\.jsonl:1: not a version record .*committed_at"):
        read_versions(path)
    with pytest.raises(ValueError, match=r"^dataset\.path must name"):
        history.validate(history.HistoryConfig())
