"""The loader's type checks of the ``meta`` fields grading reads: ``injected``, ``contradicts``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from experiments.data.dataset import DatasetError, load_dataset, write_dataset

CORPUS: list[dict[str, Any]] = [
    {"doc_id": "a", "version": 1, "valid_from": "2024-01-01T00:00:00Z",
     "text": "Keys rotate every 30 days."},
    {"doc_id": "a", "version": 2, "valid_from": "2024-03-01T00:00:00Z",
     "text": "Keys rotate every 90 days."},
]  # fmt: skip
QUERIES: list[dict[str, Any]] = [
    {"id": "q1", "text": "How often do keys rotate?", "asked_at": "2024-04-01T00:00:00Z",
     "doc_ids": ["a"], "answer": "90 days", "stale_answers": ["30 days"]},
]  # fmt: skip


def rumor(meta: Any) -> dict[str, Any]:
    return {"doc_id": "r", "version": 1, "valid_from": "2024-03-05T00:00:00Z",
            "source_type": "slack", "text": "heard it is 45 days now", "meta": meta}  # fmt: skip


def make(root: Path, corpus: list[dict[str, Any]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in QUERIES))
    return root


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"injected": "true"}, "field 'meta.injected' must be a boolean, got string ('true')"),
        ({"injected": 1}, "field 'meta.injected' must be a boolean, got integer (1)"),
        ({"injected": None}, "field 'meta.injected' must be a boolean, got null (None)"),
        ({"injected": True, "contradicts": "a"},
         "field 'meta.contradicts' must be a list of doc ids, got string ('a')"),
        ({"injected": True, "contradicts": ["a", 7]},
         "field 'meta.contradicts' item 1 must be a string, got integer (7)"),
        ({"injected": True, "contradicts": [" "]}, "field 'meta.contradicts' item 0 is empty"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("strict", [False, True])
def test_bad_meta_types_are_errors_at_their_line(
    tmp_path: Path, meta: dict[str, Any], expected: str, strict: bool
) -> None:
    root = make(tmp_path, [*CORPUS, rumor(meta)])
    with pytest.raises(DatasetError) as info:
        load_dataset(root, strict=strict)
    assert str(info.value) == f"corpus.jsonl:3: {expected}"
    assert (info.value.file, info.value.line) == ("corpus.jsonl", 3)


@pytest.mark.parametrize("strict", [False, True])
def test_contradicts_must_name_known_doc_ids(tmp_path: Path, strict: bool) -> None:
    root = make(tmp_path, [rumor({"injected": True, "contradicts": ["a", "nope"]}), *CORPUS])
    with pytest.raises(DatasetError) as info:
        load_dataset(root, strict=strict)
    assert str(info.value) == "corpus.jsonl:1: field 'meta.contradicts' names unknown doc id 'nope'"


def test_contradicts_may_name_a_later_document(tmp_path: Path) -> None:
    root = make(tmp_path, [rumor({"injected": True, "contradicts": ["a"]}), *CORPUS])
    ds = load_dataset(root)
    assert ds.corpus[0].injected and ds.corpus[0].meta["contradicts"] == ["a"]


@pytest.mark.parametrize("meta", [{"injected": True}, {"injected": False}, {"contradicts": []},
                                  {"injected": True, "contradicts": ["a"]}, {"other": "true"}])
def test_proper_meta_loads(tmp_path: Path, meta: dict[str, Any]) -> None:
    ds = load_dataset(make(tmp_path, [*CORPUS, rumor(meta)]), strict=True)
    assert ds.corpus[-1].meta == meta
    assert ds.corpus[-1].injected is (meta.get("injected") is True)


def test_writer_checks_the_same(tmp_path: Path) -> None:
    with pytest.raises(DatasetError) as info:
        write_dataset(([*CORPUS, rumor({"injected": "true"})], QUERIES), tmp_path / "out")
    assert str(info.value) == (
        "corpus.jsonl:3: field 'meta.injected' must be a boolean, got string ('true')")
    with pytest.raises(DatasetError) as info:
        write_dataset(([*CORPUS, rumor({"injected": True, "contradicts": ["zz"]})], QUERIES),
                      tmp_path / "out")  # fmt: skip
    assert str(info.value) == "corpus.jsonl:3: field 'meta.contradicts' names unknown doc id 'zz'"
