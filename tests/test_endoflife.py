"""The endoflife.date corpus: facts from a cycle's fields, questions naming the cycle as the
page in force titled it, removals ending validity, the caps and gates its card reports."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from experiments.data import endoflife
from experiments.data.dataset import load_dataset
from experiments.protocol.labels import label_dataset


def _text(title: str, product: str, cycle: str, **lines: str) -> str:
    body = [title, f"Product: {product}", f"Release cycle: {cycle}"]
    body += [f"{label}: {value}" for label, value in lines.items()]
    return "\n".join(body)


def _history(tmp_path: Path) -> Path:
    rows = [
        ("py/3.12", "2023-10-03T10:00:00+00:00",
         _text("Python 3.12", "Python", "3.12", **{"Latest version": "3.12.0",
                                                   "End of life": "2028-10-02"})),
        ("py/3.12", "2024-06-07T10:00:00+00:00",
         _text("Python 3.12", "Python", "3.12", **{"Latest version": "3.12.4",
                                                   "End of life": "2028-10-02"})),
        ("py/3.12", "2025-02-05T10:00:00+00:00",
         _text("Python 3.12", "Python", "3.12", **{"Latest version": "3.12.9",
                                                   "End of life": "2028-10-31"})),
        ("os/yosemite", "2020-01-01T00:00:00+00:00",
         _text("macOS 10.10 (Yosemite)", "macOS", "10.10", Codename="Yosemite")),
        ("os/yosemite", "2021-01-01T00:00:00+00:00",
         _text("macOS 10.10 (Yosemite)", "macOS", "10.10", Codename="Yosemite Two")),
        ("dj/1.0", "2020-01-01T00:00:00+00:00",
         _text("Django 1.0", "Django", "1.0", **{"End of life": "2021-01-01"})),
        ("dj/1.0", "2020-06-01T00:00:00+00:00",
         _text("Django 1.0", "Django", "1.0", **{"End of life": "2021-06-01"})),
    ]  # fmt: skip
    path = tmp_path / "versions.jsonl.gz"
    counts: Counter[str] = Counter()
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for doc_id, at, text in rows:
            counts[doc_id] += 1
            f.write(json.dumps({"doc_id": doc_id, "version": counts[doc_id], "committed_at": at,
                                "commit": "c", "path": "p", "fields": {}, "text": text}) + "\n")
    (tmp_path / "removed.jsonl").write_text(json.dumps(
        {"doc_id": "dj/1.0", "removed_at": "2022-01-01T00:00:00+00:00", "commit": "c"}) + "\n")
    return path


def _generate(tmp_path: Path, **kw):
    cfg = endoflife.EndoflifeConfig(max_documents=None, max_queries_per_document=40, **kw)
    return endoflife.generate(cfg, source=_history(tmp_path))


def test_facts_questions_and_removal(tmp_path: Path) -> None:
    corpus, queries = _generate(tmp_path)
    last = {r["doc_id"]: r for r in corpus}
    assert last["dj/1.0"]["valid_to"] == "2022-01-01T00:00:00Z"  # removed from the site
    assert "valid_to" not in last["py/3.12"]
    facts = Counter((q["doc_ids"][0], q["meta"]["fact"]) for q in queries)
    assert {f for _, f in facts} == {"latest", "eol"}
    assert max(facts.values()) <= 3
    # the title states the codename: its questions would give the answer away
    assert all(q["doc_ids"] != ["os/yosemite"] for q in queries)
    for q in queries:
        assert q["answer"].split(": ")[0] in ("Latest version", "End of life")
        subject = "Python 3.12" if q["doc_ids"] == ["py/3.12"] else "Django 1.0"
        assert subject in q["text"] and q["meta"]["split"] in ("dev", "test")
        assert (q["kind"] == "as_of") == q["text"].startswith("As of ")
    eol = [q for q in queries if q["meta"]["fact"] == "eol" and q["doc_ids"] == ["py/3.12"]
           and q["kind"] == "current"]  # fmt: skip
    assert eol and all(q["answer"] == "End of life: 2028-10-31" for q in eol)
    assert all(q["stale_answers"] == ["End of life: 2028-10-02"] for q in eol)


def test_the_same_config_gives_the_same_files(tmp_path: Path) -> None:
    cfg = endoflife.EndoflifeConfig(max_documents=None)
    src = _history(tmp_path)
    a = endoflife.write(cfg, tmp_path / "a", source=src)
    b = endoflife.write(cfg, tmp_path / "b", source=src)
    for name in ("corpus.jsonl", "queries.jsonl"):
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_bad_config_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"^fields must be a non-empty list"):
        endoflife.validate(endoflife.EndoflifeConfig(fields=["eol", "nope"]))


def test_the_shipped_subset_meets_the_card_s_gates(tmp_path: Path) -> None:
    """The default derivation: >= 150 distinct facts, at most 3 questions a fact, split by
    document, every gold chunk naming its cycle, and no label the harness must leave out."""
    out = endoflife.write(endoflife.EndoflifeConfig(), tmp_path / "d")
    ds = load_dataset(out)
    facts = Counter((q.doc_ids[0], q.meta["fact"]) for q in ds.queries)
    assert len(facts) >= 150 and max(facts.values()) <= 3
    splits: dict[str, set[str]] = {}
    for q in ds.queries:
        splits.setdefault(q.doc_ids[0], set()).add(q.meta["split"])
    assert all(len(s) == 1 for s in splits.values())
    kept, labels = label_dataset(ds, 500)
    assert not labels.problems and len(kept.queries) == len(ds.queries)
    for q in ds.queries:
        for cid in labels.by_query[q.id].relevant:
            title = labels.chunks.texts[cid].split("\n", 1)[0]
            assert title and title in q.text  # the gold chunk names the cycle asked about
