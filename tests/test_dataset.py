from __future__ import annotations

import json
import shutil
import tempfile
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.data.dataset import (
    Dataset,
    DatasetError,
    DocVersion,
    OutOfOrderVersionsWarning,
    Query,
    UnanswerableQueryWarning,
    format_time,
    load_dataset,
    repair_times,
    write_dataset,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "example"

CORPUS: list[dict[str, Any]] = [
    {"doc_id": "a", "version": 1, "valid_from": "2024-01-01T00:00:00Z",
     "text": "Keys rotate every 30 days."},
    {"doc_id": "a", "version": 2, "valid_from": "2024-03-01T00:00:00Z",
     "text": "Keys rotate every 90 days."},
    {"doc_id": "b", "version": 1, "valid_from": "2024-02-01T00:00:00Z",
     "text": "Backups hold 4 MB.", "depends_on": ["a"]},
]  # fmt: skip
QUERIES: list[dict[str, Any]] = [
    {"id": "q1", "text": "How often do keys rotate?", "asked_at": "2024-04-01T00:00:00Z",
     "doc_ids": ["a"], "answer": "90 days", "stale_answers": ["30 days"]},
    {"id": "q2", "text": "How big are backups?", "asked_at": "2024-04-01T00:00:00Z",
     "doc_ids": ["b"], "answer": "4 MB"},
]  # fmt: skip


def _line(item: Any) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    return json.dumps(item).encode("utf-8")


def make(root: Path, corpus: list[Any] | None = None, queries: list[Any] | None = None) -> Path:
    """Write raw lines (dicts as JSON, str/bytes verbatim) as a dataset directory."""
    root.mkdir(parents=True, exist_ok=True)
    for name, items in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        items = (CORPUS if name == "corpus.jsonl" else QUERIES) if items is None else items
        (root / name).write_bytes(b"".join(_line(i) + b"\n" for i in items))
    return root


def with_(record: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of ``record`` with fields changed; a value of ``...`` removes the field."""
    out = dict(record)
    for key, value in changes.items():
        if value is ...:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def load_error(root: Path, **kw: Any) -> str:
    with pytest.raises(DatasetError) as info:
        load_dataset(root, **kw)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message
    return message


# --- loading ------------------------------------------------------------------------------


def test_load_valid(tmp_path: Path) -> None:
    ds = load_dataset(make(tmp_path))
    assert [(d.doc_id, d.version) for d in ds.corpus] == [("a", 1), ("a", 2), ("b", 1)]
    a1 = ds.corpus[0]
    assert a1.valid_from == datetime(2024, 1, 1, tzinfo=UTC)
    assert a1.valid_from.tzinfo is not None
    assert a1.ts == datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    assert a1.valid_to is None and a1.valid_to_ts is None
    assert a1.source_type == "unknown" and a1.authority == 0.2 and a1.author == ""
    assert a1.depends_on == () and a1.meta == {} and a1.extra == {}
    assert ds.corpus[2].depends_on == ("a",)
    q1 = ds.queries[0]
    assert q1.kind == "current" and q1.doc_ids == ("a",) and q1.stale_answers == ("30 days",)
    assert q1.ts == datetime(2024, 4, 1, tzinfo=UTC).timestamp()
    assert ds.queries[1].stale_answers == ()
    assert ds.path == tmp_path and ds.unanswerable == []


def test_defaults_and_time_zones(tmp_path: Path) -> None:
    corpus = [
        {"doc_id": "a", "version": 3, "valid_from": "2024-01-01T02:00:00+02:00",
         "valid_to": "2024-01-02", "source_type": "wiki", "text": "90 days"},
        {"doc_id": "w", "version": 1, "valid_from": "2024-01-01T00:00:00", "valid_to": None,
         "source_type": "policy_doc", "authority": 1, "author": None, "meta": None,
         "text": "x"},
    ]  # fmt: skip
    ds = load_dataset(make(tmp_path, corpus, [with_(QUERIES[0], stale_answers=[])]))
    a, w = ds.corpus
    assert a.valid_from == datetime(2024, 1, 1, tzinfo=UTC)
    assert a.valid_to == datetime(2024, 1, 2, tzinfo=UTC)
    assert a.authority == 0.75  # default of wiki
    assert w.valid_from == datetime(2024, 1, 1, tzinfo=UTC)  # naive means UTC
    assert w.authority == 1.0 and isinstance(w.authority, float)
    assert w.author == "" and w.meta == {} and w.valid_to is None


def test_blank_lines_crlf_and_bom_are_tolerated(tmp_path: Path) -> None:
    body = b"\xef\xbb\xbf" + b"\r\n\r\n".join(_line(c) for c in CORPUS) + b"\r\n   \n"
    make(tmp_path)
    (tmp_path / "corpus.jsonl").write_bytes(body)
    assert len(load_dataset(tmp_path).corpus) == 3


def test_extra_fields_are_kept(tmp_path: Path) -> None:
    corpus = [with_(c, zeta=1, alpha={"k": [1, 2]}) for c in CORPUS]
    queries = [with_(QUERIES[0], difficulty="hard"), QUERIES[1]]
    ds = load_dataset(make(tmp_path, corpus, queries))
    assert ds.corpus[0].extra == {"zeta": 1, "alpha": {"k": [1, 2]}}
    assert ds.queries[0].extra == {"difficulty": "hard"}
    out = write_dataset(ds, tmp_path / "out")
    first = json.loads((out / "corpus.jsonl").read_text().splitlines()[0])
    assert list(first)[-2:] == ["alpha", "zeta"]  # extras last, sorted
    assert load_dataset(out).corpus[0].extra == ds.corpus[0].extra


def test_meta_and_injected(tmp_path: Path) -> None:
    corpus = CORPUS + [
        {"doc_id": "r", "version": 1, "valid_from": "2024-03-05T00:00:00Z",
         "source_type": "slack", "text": "rumor: 45 days", "meta": {"injected": True}},
    ]  # fmt: skip
    ds = load_dataset(make(tmp_path, corpus))
    assert ds.corpus[-1].injected and not ds.corpus[0].injected
    assert ds.corpus[-1].authority == 0.3
    assert ds.summary() == {
        "documents": 3, "versions": 4, "queries": 2, "injected": 1, "unanswerable": 0,
        "repaired": 0,
    }  # fmt: skip


def test_helpers(tmp_path: Path) -> None:
    ds = load_dataset(make(tmp_path))
    assert ds.doc_ids() == ["a", "b"]
    assert [d.version for d in ds.versions_of("a")] == [1, 2]
    with pytest.raises(KeyError):
        ds.versions_of("zz")
    assert [(d.doc_id, d.version) for d in ds.in_time_order()] == [("a", 1), ("b", 1), ("a", 2)]


def test_in_time_order_is_stable(tmp_path: Path) -> None:
    t = "2024-01-01T00:00:00Z"
    corpus = [{"doc_id": n, "version": 1, "valid_from": t, "text": "90 days"} for n in "zya"]
    ds = load_dataset(make(tmp_path, corpus, [with_(QUERIES[0], doc_ids=["a"])]))
    assert [d.doc_id for d in ds.in_time_order()] == ["z", "y", "a"]


# --- validation errors --------------------------------------------------------------------

_BAD_CORPUS: list[tuple[Any, str]] = [
    ('{"doc_id": "b", "version": 2,', "invalid JSON: "),
    ("[1, 2]", "expected a JSON object, got array"),
    ('"just a string"', "expected a JSON object, got string"),
    ("null", "expected a JSON object, got null"),
    (with_(CORPUS[2], text=...), "missing field 'text'"),
    (with_(CORPUS[2], doc_id=...), "missing field 'doc_id'"),
    (with_(CORPUS[2], version=...), "missing field 'version'"),
    (with_(CORPUS[2], valid_from=...), "missing field 'valid_from'"),
    (with_(CORPUS[2], text=None), "field 'text' must be a string, got null"),
    (with_(CORPUS[2], text=5), "field 'text' must be a string, got integer (5)"),
    (with_(CORPUS[2], text=""), "field 'text' is empty"),
    (with_(CORPUS[2], text=" \n\t "), "field 'text' is empty"),
    (with_(CORPUS[2], doc_id=""), "field 'doc_id' is empty"),
    (with_(CORPUS[2], doc_id=["b"]), "field 'doc_id' must be a string, got array (['b'])"),
    (with_(CORPUS[2], version=True), "field 'version' must be an integer, got boolean (True)"),
    (with_(CORPUS[2], version="1"), "field 'version' must be an integer, got string ('1')"),
    (with_(CORPUS[2], version=1.0), "field 'version' must be an integer, got number (1.0)"),
    (with_(CORPUS[2], version=0), "field 'version' must be in [1, 2147483647], got 0"),
    (with_(CORPUS[2], version=10**40), "field 'version' must be in [1, "),
    (with_(CORPUS[2], valid_from="9999-12-31T23:59:59"),
     "field 'valid_from' must be before 9999-01-01"),
    (with_(CORPUS[2], valid_from="yesterday"),
     "field 'valid_from' is not an ISO-8601 time: 'yesterday'"),
    (with_(CORPUS[2], valid_from=1706745600),
     "field 'valid_from' must be an ISO-8601 string, got integer"),
    (with_(CORPUS[2], valid_from=None), "field 'valid_from' must be an ISO-8601 time, got null"),
    (with_(CORPUS[2], valid_to="soon"), "field 'valid_to' is not an ISO-8601 time: 'soon'"),
    (with_(CORPUS[2], valid_to="2024-02-01T00:00:00Z"),
     "field 'valid_to' (2024-02-01T00:00:00Z) must be after valid_from (2024-02-01T00:00:00Z)"),
    (with_(CORPUS[2], valid_to="2024-01-31T21:00:00-02:00"),
     "field 'valid_to' (2024-01-31T23:00:00Z) must be after valid_from (2024-02-01T00:00:00Z)"),
    (with_(CORPUS[2], authority=1.5), "field 'authority' must be in [0, 1], got 1.5"),
    (with_(CORPUS[2], authority=-0.1), "field 'authority' must be in [0, 1], got -0.1"),
    (with_(CORPUS[2], authority=10**30), "field 'authority' must be in [0, 1], got "),
    (with_(CORPUS[2], authority=True), "field 'authority' must be a number, got boolean (True)"),
    (with_(CORPUS[2], authority="0.5"), "field 'authority' must be a number, got string"),
    (json.dumps(with_(CORPUS[2], authority=float("nan"))), "invalid JSON: NaN is not a JSON"),
    (json.dumps(with_(CORPUS[2], authority=float("inf"))), "invalid JSON: Infinity is not a"),
    (with_(CORPUS[2], source_type=3), "field 'source_type' must be a string, got integer"),
    (with_(CORPUS[2], author=False), "field 'author' must be a string, got boolean"),
    (with_(CORPUS[2], depends_on="a"), "field 'depends_on' must be a list of strings, got string"),
    (with_(CORPUS[2], depends_on=["a", 1]), "field 'depends_on' item 1 must be a string, got"),
    (with_(CORPUS[2], depends_on=["nope"]), "field 'depends_on' names unknown doc id 'nope'"),
    (with_(CORPUS[2], meta=[1]), "field 'meta' must be an object, got array"),
    ('{"doc_id": "b", "doc_id": "c", "version": 1}', "duplicate key 'doc_id'"),
    (with_(CORPUS[1], text="again"), "duplicate version 2 of doc 'a' (also on line 2)"),
    (with_(CORPUS[0], valid_from="2024-05-01T00:00:00Z"),
     "version 1 of doc 'a' comes after version 2 (line 2); versions must increase in file order"),
    (b'{"doc_id": "b", "version": 1, "text": "caf\xe9"}',
     "not valid UTF-8: byte 0xe9 at column 43"),
    ('{"doc_id": "b", "version": 1, "text": "\\ud800"}', "a string escape encodes a lone"),
    ("[" * 100_000, "invalid JSON: "),
    ('{"version": ' + "9" * 5000 + "}", "invalid JSON: "),
]


@pytest.mark.parametrize(("bad", "expected"), _BAD_CORPUS)
def test_corpus_errors(tmp_path: Path, bad: Any, expected: str) -> None:
    # the bad line is line 3, after two valid lines and before a valid one
    corpus = [CORPUS[0], CORPUS[1], bad, with_(CORPUS[2], doc_id="c")]
    message = load_error(make(tmp_path, corpus))
    assert message.startswith(f"corpus.jsonl:3: {expected}")


_OUT_OF_ORDER: list[tuple[Any, str]] = [
    (with_(CORPUS[1], version=3),
     "valid_from 2024-03-01T00:00:00Z of doc 'a' version 3 is not after version 2's "
     "2024-03-01T00:00:00Z (line 2)"),
    (with_(CORPUS[1], version=3, valid_from="2024-02-01T00:00:00Z"),
     "valid_from 2024-02-01T00:00:00Z of doc 'a' version 3 is not after version 2's "
     "2024-03-01T00:00:00Z (line 2)"),
    (with_(CORPUS[1], version=3, valid_from="2024-03-01T05:00:00+05:00"),
     "valid_from 2024-03-01T00:00:00Z of doc 'a' version 3 is not after version 2's "
     "2024-03-01T00:00:00Z (line 2)"),
]


@pytest.mark.parametrize(("bad", "expected"), _OUT_OF_ORDER)
def test_strict_makes_out_of_order_versions_an_error(
    tmp_path: Path, bad: Any, expected: str
) -> None:
    corpus = [CORPUS[0], CORPUS[1], bad, with_(CORPUS[2], doc_id="c")]
    assert load_error(make(tmp_path, corpus), strict=True) == f"corpus.jsonl:3: {expected}"


def test_out_of_order_versions_are_repaired_with_one_warning(tmp_path: Path) -> None:
    corpus = [
        CORPUS[0],
        CORPUS[1],                                                          # a v2: 2024-03-01
        with_(CORPUS[1], version=3, valid_from="2024-02-01T00:00:00Z",      # earlier: moved
              valid_to="2024-02-15T00:00:00Z"),                             # then before: dropped
        with_(CORPUS[1], version=4, valid_from="2024-03-01T00:00:00Z",      # equal: moved again
              valid_to="2024-06-01T00:00:00Z"),                             # still after: kept
        with_(CORPUS[1], version=5, valid_from="2024-07-01T00:00:00Z"),     # in order: kept
        CORPUS[2],
        with_(CORPUS[2], version=2, valid_from="2024-01-01T00:00:00+01:00"),
    ]  # fmt: skip
    with pytest.warns(OutOfOrderVersionsWarning) as caught:
        ds = load_dataset(make(tmp_path, corpus))
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "repaired 3 of 7 versions" in message
    assert "2 valid_from moved" not in message and "3 valid_from moved" in message
    assert "1 valid_to dropped" in message and "strict=True" in message
    assert "corpus.jsonl:3 'a' v3, corpus.jsonl:4 'a' v4, corpus.jsonl:7 'b' v2" in message
    base = datetime(2024, 3, 1, tzinfo=UTC)
    times = {(d.doc_id, d.version): (d.valid_from, d.valid_to) for d in ds.corpus}
    assert times[("a", 2)] == (base, None)
    assert times[("a", 3)] == (base + timedelta(seconds=1), None)
    assert times[("a", 4)] == (base + timedelta(seconds=2), datetime(2024, 6, 1, tzinfo=UTC))
    assert times[("a", 5)] == (datetime(2024, 7, 1, tzinfo=UTC), None)
    assert times[("b", 2)] == (datetime(2024, 2, 1, 0, 0, 1, tzinfo=UTC), None)
    assert [(d, v) for d, v, _ in ds.repaired] == [("a", 3), ("a", 4), ("b", 2)]
    assert ds.repaired[0][2] == ("valid_from 2024-02-01T00:00:00Z -> 2024-03-01T00:00:01Z, "
                                 "valid_to 2024-02-15T00:00:00Z dropped")  # fmt: skip
    assert ds.summary()["repaired"] == 3
    # the repaired dataset is canonical: written and loaded again, nothing is left to repair
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = load_dataset(write_dataset(ds, tmp_path / "out"), strict=True)
    assert again.corpus == ds.corpus and again.repaired == []


def test_out_of_order_warning_names_only_the_first_few(tmp_path: Path) -> None:
    corpus = [with_(CORPUS[0], version=v) for v in range(1, 10)]  # nine versions, same time
    with pytest.warns(OutOfOrderVersionsWarning, match=r"v6 \(\+3 more\)$"):
        ds = load_dataset(make(tmp_path, corpus, [with_(QUERIES[0], answer="30 days")]))
    assert [d.ts for d in ds.corpus] == [ds.corpus[0].ts + i for i in range(9)]


def test_valid_to_before_its_own_valid_from_stays_an_error(tmp_path: Path) -> None:
    corpus = [CORPUS[0], with_(CORPUS[1], valid_to="2024-02-01T00:00:00Z")]
    assert load_error(make(tmp_path, corpus)) == (
        "corpus.jsonl:2: field 'valid_to' (2024-02-01T00:00:00Z) must be after valid_from "
        "(2024-03-01T00:00:00Z)"
    )


def test_repair_times() -> None:
    t = datetime(2024, 1, 1, tzinfo=UTC)
    s = timedelta(seconds=1)
    assert repair_times([]) == []
    assert repair_times([t, t + 5 * s, t + 9 * s]) == [t, t + 5 * s, t + 9 * s]
    assert repair_times([t, t - s, t - 2 * s, t + 5 * s]) == [t, t + s, t + 2 * s, t + 5 * s]
    assert repair_times([t + s, t]) == [t + s, t + 2 * s]
    naive_and_offset = repair_times([datetime(2024, 1, 1), datetime.fromisoformat(
        "2024-01-01T01:00:00+01:00")])  # fmt: skip
    assert naive_and_offset == [t, t + s]
    assert all(x.tzinfo is UTC for x in naive_and_offset)


def test_writer_does_not_repair(tmp_path: Path) -> None:
    corpus = [CORPUS[0], with_(CORPUS[1], valid_from=CORPUS[0]["valid_from"])]
    with pytest.raises(DatasetError, match=r"^corpus\.jsonl:2: valid_from 2024-01-01T00:00:00Z "):
        write_dataset((corpus, QUERIES[:1]), tmp_path / "out")


def test_first_bad_line_wins(tmp_path: Path) -> None:
    corpus = [CORPUS[0], with_(CORPUS[1], text=""), "{", with_(CORPUS[2], version=0)]
    assert load_error(make(tmp_path, corpus)) == "corpus.jsonl:2: field 'text' is empty"


def test_error_line_numbers_count_blank_lines(tmp_path: Path) -> None:
    corpus = [CORPUS[0], "", "   ", CORPUS[1], with_(CORPUS[2], text="")]
    assert load_error(make(tmp_path, corpus)) == "corpus.jsonl:5: field 'text' is empty"


def test_depends_on_may_name_a_later_document(tmp_path: Path) -> None:
    corpus = [with_(CORPUS[0], depends_on=["b"]), CORPUS[1], with_(CORPUS[2], depends_on=...)]
    assert load_dataset(make(tmp_path, corpus)).corpus[0].depends_on == ("b",)


def test_exact_spec_message(tmp_path: Path) -> None:
    corpus = [CORPUS[0]] * 1 + [with_(CORPUS[2], doc_id=f"d{i}") for i in range(15)]
    corpus.append(with_(CORPUS[2], doc_id="z", valid_from="yesterday"))
    message = load_error(make(tmp_path, corpus))
    assert message == "corpus.jsonl:17: field 'valid_from' is not an ISO-8601 time: 'yesterday'"


def test_error_has_location_attributes(tmp_path: Path) -> None:
    with pytest.raises(DatasetError) as info:
        load_dataset(make(tmp_path, [CORPUS[0], "{"]))
    assert isinstance(info.value, ValueError)
    assert (info.value.file, info.value.line) == ("corpus.jsonl", 2)


def test_long_values_are_shortened_in_messages(tmp_path: Path) -> None:
    message = load_error(make(tmp_path, [with_(CORPUS[0], valid_from="x\n" * 500)]))
    assert message.startswith("corpus.jsonl:1: field 'valid_from' is not an ISO-8601 time: ")
    assert len(message) < 200


_BAD_QUERIES: list[tuple[Any, str]] = [
    ("{oops}", "invalid JSON: "),
    ("42", "expected a JSON object, got integer"),
    (with_(QUERIES[1], id=...), "missing field 'id'"),
    (with_(QUERIES[1], id=""), "field 'id' is empty"),
    (with_(QUERIES[1], id=7), "field 'id' must be a string, got integer"),
    (with_(QUERIES[1], id="q1"), "duplicate query id 'q1' (first on line 1)"),
    (with_(QUERIES[1], text=""), "field 'text' is empty"),
    (with_(QUERIES[1], asked_at="noon"), "field 'asked_at' is not an ISO-8601 time: 'noon'"),
    (with_(QUERIES[1], asked_at=...), "missing field 'asked_at'"),
    (with_(QUERIES[1], doc_ids=...), "missing field 'doc_ids'"),
    (with_(QUERIES[1], doc_ids=[]), "field 'doc_ids' is empty"),
    (with_(QUERIES[1], doc_ids="b"), "field 'doc_ids' must be a list of strings, got string"),
    (with_(QUERIES[1], doc_ids=["b", ""]), "field 'doc_ids' item 1 is empty"),
    (with_(QUERIES[1], doc_ids=["b", "zz"]), "field 'doc_ids' names unknown doc id 'zz'"),
    (with_(QUERIES[1], answer=...), "missing field 'answer'"),
    (with_(QUERIES[1], answer=""), "field 'answer' is empty"),
    (with_(QUERIES[1], answer=4), "field 'answer' must be a string, got integer"),
    (with_(QUERIES[1], stale_answers="3 MB"), "field 'stale_answers' must be a list of strings"),
    (with_(QUERIES[1], stale_answers=[True]), "field 'stale_answers' item 0 must be a string"),
    (with_(QUERIES[1], stale_answers=[""]), "field 'stale_answers' item 0 is empty"),
    (with_(QUERIES[1], kind=""), "field 'kind' is empty"),
    (with_(QUERIES[1], kind=1), "field 'kind' must be a string, got integer"),
    (with_(QUERIES[1], meta="x"), "field 'meta' must be an object, got string"),
    (b'{"id": "\xff"}', "not valid UTF-8: byte 0xff at column 9"),
]


@pytest.mark.parametrize(("bad", "expected"), _BAD_QUERIES)
def test_query_errors(tmp_path: Path, bad: Any, expected: str) -> None:
    message = load_error(make(tmp_path, queries=[QUERIES[0], "", bad, "never read"]))
    assert message.startswith(f"queries.jsonl:3: {expected}")


def test_missing_directory_and_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert str(missing) in load_error(missing)
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    assert load_error(a_file) == f"{a_file}: is not a directory"
    make(tmp_path / "d")
    (tmp_path / "d" / "queries.jsonl").unlink()
    assert load_error(tmp_path / "d") == f"{tmp_path / 'd' / 'queries.jsonl'}: file not found"
    (tmp_path / "d" / "corpus.jsonl").unlink()
    assert load_error(tmp_path / "d") == f"{tmp_path / 'd' / 'corpus.jsonl'}: file not found"


def test_empty_files(tmp_path: Path) -> None:
    assert load_error(make(tmp_path / "c", ["", " "])) == "corpus.jsonl: contains no documents"
    assert load_error(make(tmp_path / "q", queries=[])) == "queries.jsonl: contains no queries"


# --- unanswerable queries -----------------------------------------------------------------


def test_unanswerable_queries_are_excluded_with_one_warning(tmp_path: Path) -> None:
    queries = [
        QUERIES[0],
        with_(QUERIES[1], id="bad1", answer="14 MB"),  # "4 MB" in the text is not "14 MB"
        with_(QUERIES[1], id="bad2", doc_ids=["a"]),  # the answer is in another document
        QUERIES[1],
        with_(QUERIES[0], id="old", answer="30 days"),  # an older version counts
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = load_dataset(make(tmp_path, queries=queries))
    assert len(caught) == 1
    assert issubclass(caught[0].category, UnanswerableQueryWarning)
    text = str(caught[0].message)
    assert "2 of 5" in text and "bad1, bad2" in text
    assert caught[0].filename == __file__
    assert [q.id for q in ds.queries] == ["q1", "q2", "old"]
    assert [qid for qid, _ in ds.unanswerable] == ["bad1", "bad2"]
    assert "'14 MB'" in ds.unanswerable[0][1] and "'b'" in ds.unanswerable[0][1]
    assert ds.summary()["queries"] == 3 and ds.summary()["unanswerable"] == 2


def test_unanswerable_warning_lists_only_the_first_few(tmp_path: Path) -> None:
    queries = [QUERIES[0]] + [with_(QUERIES[1], id=f"x{i}", answer="nowhere") for i in range(8)]
    with pytest.warns(UnanswerableQueryWarning, match=r"x0, x1, x2, x3, x4 \(\+3 more\)"):
        ds = load_dataset(make(tmp_path, queries=queries))
    assert len(ds.queries) == 1 and len(ds.unanswerable) == 8


def test_strict_makes_unanswerable_an_error(tmp_path: Path) -> None:
    queries = [QUERIES[0], QUERIES[1], with_(QUERIES[1], id="bad", answer="14 MB")]
    message = load_error(make(tmp_path, queries=queries), strict=True)
    assert message == (
        "queries.jsonl:3: answer '14 MB' does not occur in any version of doc_ids 'b'"
    )


def test_no_warning_when_all_answerable(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_dataset(make(tmp_path), strict=True)


# --- writing, round trips, fingerprint ----------------------------------------------------


def test_example_dataset_is_canonical(tmp_path: Path) -> None:
    ds = load_dataset(EXAMPLE)
    assert ds.summary() == {
        "documents": 3, "versions": 4, "queries": 2, "injected": 1, "unanswerable": 0,
        "repaired": 0,
    }  # fmt: skip
    out = write_dataset(ds, tmp_path / "out")
    for name in ("corpus.jsonl", "queries.jsonl"):
        assert (out / name).read_bytes() == (EXAMPLE / name).read_bytes()


def test_example_in_readme_matches_the_shipped_files() -> None:
    readme = (EXAMPLE.parent / "README.md").read_text(encoding="utf-8")
    for name in ("corpus.jsonl", "queries.jsonl"):
        assert (EXAMPLE / name).read_text(encoding="utf-8") in readme


_MESSY_CORPUS = [
    '{"text": "Keys rotate every 30 days.", "version": 1, "doc_id": "a", "valid_from": '
    '"2024-01-01T01:00:00+01:00", "authority": 1, "zz": [1], "aa": "x", "valid_to": null}',
    {"doc_id": "a", "version": 2, "valid_from": "2024-03-01", "valid_to": "2025-01-01T00:00:00.250",
     "text": "Keys rotate every 90 days. Ünïcödé ✓", "source_type": "email", "meta": {"k": 1}},
    {"doc_id": "b", "version": 1, "valid_from": "2024-02-01 00:00:00Z",
     "text": "Backups hold 4 MB.", "depends_on": ["a"], "author": "ops"},
]  # fmt: skip
_MESSY_QUERIES = [
    {"stale_answers": ["30 days"], "answer": "90 days", "doc_ids": ["a"], "id": "q1",
     "asked_at": "2024-04-01T02:00:00+02:00", "text": "How often?", "meta": {"n": None}},
    {"id": "q2", "text": "How big?", "asked_at": "2024-04-01", "doc_ids": ["b"],
     "answer": "4 MB", "kind": "as_of", "extra_field": {"b": 2, "a": 1}},
]  # fmt: skip


def test_round_trip_load_write_load(tmp_path: Path) -> None:
    first = load_dataset(make(tmp_path / "in", _MESSY_CORPUS, _MESSY_QUERIES))
    second = load_dataset(write_dataset(first, tmp_path / "out"))
    assert second.corpus == first.corpus
    assert second.queries == first.queries
    assert second == first  # path does not take part in equality
    assert second.corpus[1].valid_to == datetime(2025, 1, 1, 0, 0, 0, 250000, tzinfo=UTC)
    assert first.fingerprint() == second.fingerprint()


def test_write_load_write_is_byte_identical(tmp_path: Path) -> None:
    a = write_dataset((_records(_MESSY_CORPUS), _MESSY_QUERIES), tmp_path / "a")
    b = write_dataset(load_dataset(a), tmp_path / "b")
    for name in ("corpus.jsonl", "queries.jsonl"):
        data = (a / name).read_bytes()
        assert data == (b / name).read_bytes()
        assert data.endswith(b"\n") and b"\r" not in data and not data.endswith(b"\n\n")
    line = (a / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[1]
    assert line == (
        '{"doc_id": "a", "version": 2, "valid_from": "2024-03-01T00:00:00Z", '
        '"valid_to": "2025-01-01T00:00:00.250000Z", "source_type": "email", "authority": 0.5, '
        '"author": "", "text": "Keys rotate every 90 days. Ünïcödé ✓", "meta": {"k": 1}}'
    )
    qline = (a / "queries.jsonl").read_text(encoding="utf-8").splitlines()[1]
    assert qline == (
        '{"id": "q2", "kind": "as_of", "asked_at": "2024-04-01T00:00:00Z", "text": "How big?", '
        '"doc_ids": ["b"], "answer": "4 MB", "stale_answers": [], '
        '"extra_field": {"b": 2, "a": 1}}'
    )


def _records(lines: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(x) if isinstance(x, str) else x for x in lines]


def test_write_accepts_objects_and_validates_records(tmp_path: Path) -> None:
    ds = load_dataset(make(tmp_path / "in"))
    out = write_dataset((ds.corpus, ds.queries), tmp_path / "objs")
    assert load_dataset(out) == ds
    with pytest.raises(DatasetError, match=r"^corpus\.jsonl:2: field 'version' must be in \[1, "):
        write_dataset(([CORPUS[0], with_(CORPUS[1], version=0)], QUERIES), tmp_path / "bad")
    with pytest.raises(DatasetError, match=r"^queries\.jsonl:1: field 'doc_ids' names unknown"):
        write_dataset((CORPUS, [with_(QUERIES[0], doc_ids=["zz"])]), tmp_path / "bad")
    with pytest.raises(DatasetError, match=r"^corpus\.jsonl:1: field 'authority' must be in"):
        write_dataset(([with_(CORPUS[0], authority=float("nan"))], []), tmp_path / "bad")
    assert not (tmp_path / "bad" / "corpus.jsonl").exists()


def test_write_accepts_datetimes_and_leaves_no_temp_files(tmp_path: Path) -> None:
    corpus = [with_(CORPUS[0], valid_from=datetime(2024, 1, 1, 12, 30))]
    out = write_dataset((corpus, [with_(QUERIES[0], answer="30 days")]), tmp_path / "new" / "d")
    assert sorted(p.name for p in out.iterdir()) == ["corpus.jsonl", "queries.jsonl"]
    assert '"valid_from": "2024-01-01T12:30:00Z"' in (out / "corpus.jsonl").read_text()


def test_writing_keeps_excluded_queries_in_file_order(tmp_path: Path) -> None:
    queries = [with_(QUERIES[1], id="bad", answer="nowhere"), QUERIES[0], QUERIES[1]]
    src = write_dataset((CORPUS, queries), tmp_path / "src")
    with pytest.warns(UnanswerableQueryWarning):
        ds = load_dataset(src)
    assert [q.id for q in ds.queries] == ["q1", "q2"]
    out = write_dataset(ds, tmp_path / "out")
    assert (out / "queries.jsonl").read_bytes() == (src / "queries.jsonl").read_bytes()


def test_fingerprint(tmp_path: Path) -> None:
    written = write_dataset((_records(_MESSY_CORPUS), _MESSY_QUERIES), tmp_path / "c")
    canonical = load_dataset(written)
    messy = load_dataset(make(tmp_path / "m", _MESSY_CORPUS, _MESSY_QUERIES))
    fp = messy.fingerprint()
    assert len(fp) == 64 and fp == canonical.fingerprint()
    changed = load_dataset(make(tmp_path / "x", _MESSY_CORPUS, [_MESSY_QUERIES[0]]))
    assert changed.fingerprint() != fp
    other = [with_(_records(_MESSY_CORPUS)[0], authority=0.99)] + _MESSY_CORPUS[1:]
    assert load_dataset(make(tmp_path / "y", other, _MESSY_QUERIES)).fingerprint() != fp


def test_format_time() -> None:
    assert format_time(datetime(2024, 1, 2, 3, 4, 5)) == "2024-01-02T03:04:05Z"
    assert format_time(datetime(5, 1, 1, tzinfo=UTC)) == "0005-01-01T00:00:00Z"
    micro = datetime(2024, 1, 1, 0, 0, 0, 7, tzinfo=UTC)
    assert format_time(micro) == "2024-01-01T00:00:00.000007Z"


def test_dataclass_construction_fills_defaults() -> None:
    t = datetime(2024, 1, 1, tzinfo=UTC)
    d = DocVersion("a", 1, "t", t, source_type="wiki", depends_on=["x"])  # type: ignore[arg-type]
    assert d.authority == 0.75 and d.depends_on == ("x",)
    q = Query("q", "t", t, ["a"], "x")  # type: ignore[arg-type]
    assert q.doc_ids == ("a",) and q.kind == "current"
    assert Dataset([d], [q]).summary()["documents"] == 1


# --- fuzz ---------------------------------------------------------------------------------

_json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_times = st.sampled_from(
    ["2024-01-01T00:00:00Z", "2024-02-01", "2023-12-31T23:00:00-05:00", "yesterday", "",
     "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "2024-13-01"]
) | _json_values  # fmt: skip
_doc_like = st.fixed_dictionaries(
    {},
    optional={
        "doc_id": st.sampled_from(["a", "b", ""]) | _json_values,
        "version": st.integers(-1, 4) | _json_values,
        "text": st.sampled_from(["90 days", "x", "", " "]) | _json_values,
        "valid_from": _times,
        "valid_to": _times,
        "source_type": st.sampled_from(["wiki", "slack", "zzz"]) | _json_values,
        "authority": st.floats() | st.integers(-2, 2) | _json_values,
        "author": _json_values,
        "depends_on": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2) | _json_values,
        "meta": _json_values,
    },
)
_line_bytes = st.one_of(
    st.binary(max_size=40),
    _json_values.map(lambda v: json.dumps(v).encode()),
    _doc_like.map(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass")),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_line_bytes, max_size=6), glue=st.sampled_from([b"\n", b"\r\n", b"\n\n"]))
def test_fuzz_load_only_raises_dataset_error(lines: list[bytes], glue: bytes) -> None:
    root = Path(tempfile.mkdtemp())
    try:
        (root / "corpus.jsonl").write_bytes(glue.join(lines))
        (root / "queries.jsonl").write_text(json.dumps(QUERIES[0]) + "\n")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnanswerableQueryWarning)
            try:
                ds = load_dataset(root)
            except DatasetError as e:
                assert "\n" not in str(e)
                return
        # whatever loads must survive the canonical round trip
        again = load_dataset(write_dataset(ds, root / "out"))
        assert again.corpus == ds.corpus
    finally:
        shutil.rmtree(root)
