"""The real versioned corpora (site policy, PEPs): questions derived from small hand-made
histories, checked against the versions in force; one test runs the default configs on the
full files shipped in datasets/."""

from __future__ import annotations

import gzip
import json
import re
import warnings
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from experiments.data import deriver, peps, site_policy
from experiments.data.dataset import Dataset, DatasetError, DocVersion, Query, load_dataset
from experiments.data.deriver import date_phrase, doc_split
from experiments.protocol.answers import contains_answer
from smartvector.chunking import chunk_text

# --- fixtures -----------------------------------------------------------------------------


def _policy(title: str, *paragraphs: str) -> str:
    return f"---\ntitle: {title}\nversions:\n  fpt: '*'\n---\n\n" + "\n\n".join(paragraphs)


def _privacy(date: str, days: int, contact: str) -> str:
    return _policy("Privacy Policy", f"Effective date: {date}",
                   "We collect the data you give us when you sign up.",
                   f"We delete your account data within {days} days of your request.",
                   contact)  # fmt: skip


_SITE: list[tuple[str, str, str]] = [
    # privacy (test split): a date and a duration change; v4 carries a time before v3's
    ("privacy", "2019-01-10T09:00:00-08:00", _privacy("January 10, 2019", 30, "Mail us.")),
    ("privacy", "2019-09-02T10:00:00+02:00", _privacy("September 2, 2019", 90, "Mail us.")),
    ("privacy", "2020-11-20T12:00:00+00:00", _privacy("November 20, 2020", 60, "Mail us.")),
    ("privacy", "2020-11-20T11:00:00+00:00", _privacy("November 20, 2020", 60, "Mail or call.")),
    ("privacy", "2021-08-01T00:00:00+00:00", _privacy("November 20, 2020", 60, "Call us.")),
    # terms (dev): the sentence is reworded along with its value
    ("terms", "2019-03-01T00:00:00+00:00", _policy(
        "Terms of Service", "Refunds are issued within 14 days of a cancellation.",
        "Fees are billed monthly.")),
    ("terms", "2020-03-01T00:00:00+00:00", _policy(
        "Terms of Service", "Refunds are issued within 21 days of a cancellation.",
        "Fees are billed monthly.")),
    ("terms", "2021-03-01T00:00:00+00:00", _policy(
        "Terms of Service", "Refunds will be issued within 7 days of any cancellation.",
        "Fees are billed monthly.")),
    # retention (test): a percentage
    ("retention", "2018-06-01T00:00:00+00:00", _policy(
        "Marketplace Agreement", "GitHub keeps 25% of the sale price.")),
    ("retention", "2020-06-01T00:00:00+00:00", _policy(
        "Marketplace Agreement", "GitHub keeps 5% of the sale price.")),
    # cookies (dev): the value sits in two identical paragraphs, so no answer string can
    # tell them apart: no questions
    ("cookies", "2019-01-01T00:00:00+00:00", _policy(
        "Cookies", "Cookies expire after 30 days.", "Consent.", "Cookies expire after 30 days.")),
    ("cookies", "2020-01-01T00:00:00+00:00", _policy(
        "Cookies", "Cookies expire after 60 days.", "Consent.", "Cookies expire after 60 days.")),
    # static (dev): one version, nothing changes
    ("static", "2019-05-05T00:00:00+00:00", _policy("Static", "Data is kept for 30 days.")),
]


def _pep(n: int, **fields: str) -> tuple[dict[str, str], str]:
    header = {"PEP": str(n), "Title": f"Proposal {n}", **fields}
    text = "\n".join(f"{k}: {v}" for k, v in header.items())
    return header, text + "\n\nAbstract\n\nThis PEP proposes a change to Python."


_PEPS: list[tuple[str, str, tuple[dict[str, str], str]]] = [
    ("pep-0001", "2015-01-01T00:00:00+00:00", _pep(1, Status="Draft", Type="Standards Track",
                                                   **{"Python-Version": "3.5"})),
    ("pep-0001", "2015-06-01T00:00:00+00:00", _pep(1, Status="Accepted", Type="Standards Track",
                                                   **{"Python-Version": "3.5"})),
    ("pep-0001", "2016-03-01T00:00:00+00:00", _pep(1, Status="Final", Type="Standards Track",
                                                   **{"Python-version": "3.6"})),
    ("pep-0002", "2014-01-01T00:00:00+00:00", _pep(2, Status="Draft", Type="Process")),
    ("pep-0002", "2017-01-01T00:00:00+00:00", _pep(2, Status="Rejected", Type="Process")),
    ("pep-0003", "2014-05-01T00:00:00+00:00", _pep(3, Status="Active", Type="Process")),
    ("pep-0005", "2013-01-01T00:00:00+00:00", _pep(5, Status="Draft", Type="Informational")),
    ("pep-0005", "2013-09-01T00:00:00+00:00", _pep(5, Status="Superseded", Type="Informational",
                                                   **{"Superseded-By": "6"})),
]  # fmt: skip


def _write_raw(path: Path, records: list[dict[str, Any]]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    return path


@pytest.fixture
def site_raw(tmp_path: Path) -> Path:
    records, counts = [], {}
    for doc_id, when, text in _SITE:
        counts[doc_id] = counts.get(doc_id, 0) + 1
        records.append({"doc_id": doc_id, "version": counts[doc_id], "committed_at": when,
                        "path": f"Policies/{doc_id}.md", "commit": f"{len(records):040x}",
                        "text": text})  # fmt: skip
    return _write_raw(tmp_path / "site.jsonl.gz", records)


@pytest.fixture
def peps_raw(tmp_path: Path) -> Path:
    records, counts = [], {}
    for doc_id, when, (fields, text) in _PEPS:
        counts[doc_id] = counts.get(doc_id, 0) + 1
        records.append({"doc_id": doc_id, "version": counts[doc_id], "committed_at": when,
                        "commit": f"{len(records):040x}", "path": f"{doc_id}.txt",
                        "fields": fields, "text": text})  # fmt: skip
    return _write_raw(tmp_path / "peps.jsonl.gz", records)


def _load(path: Path) -> Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither repairs nor unanswerable queries
        return load_dataset(path, strict=True)


def _in_force(ds: Dataset, q: Query) -> DocVersion:
    return [d for d in ds.versions_of(q.doc_ids[0]) if d.valid_from <= q.asked_at][-1]


def _chunks_with(text: str, answer: str) -> int:
    return sum(contains_answer(c.text, answer) for c in chunk_text(text))


def _check_queries(ds: Dataset, after_days: int, long_days: int) -> None:
    """Every query against the loaded versions: answer in force, stale answers earlier,
    timing regime, wording."""
    assert ds.queries
    for q in ds.queries:
        versions = ds.versions_of(q.doc_ids[0])
        now = _in_force(ds, q)
        assert _chunks_with(now.text, q.answer) == 1, q.id  # in exactly one chunk
        for stale in q.stale_answers:
            assert not contains_answer(now.text, stale), q.id
            assert any(contains_answer(d.text, stale) for d in versions
                       if d.valid_from < now.valid_from), q.id  # fmt: skip
        for said in (q.answer, *q.stale_answers, *q.meta["later_answers"]):
            assert not contains_answer(q.text, said), q.id
        timing = q.meta["timing"]
        assert q.kind == ("as_of" if timing == "as_of" else "current")
        assert q.meta["split"] == doc_split(q.doc_ids[0], 0.5)
        if timing in ("after_change", "long_after"):
            changed = datetime.fromisoformat(q.meta["changed_at"])
            before = [d for d in versions if d.valid_from < changed]
            assert before and not contains_answer(before[-1].text, q.answer)  # a change
            assert any(d.valid_from == changed for d in versions)
            assert all(contains_answer(d.text, q.answer)
                       for d in versions if changed <= d.valid_from <= q.asked_at)  # fmt: skip
        if timing == "after_change":
            assert timedelta(0) < q.asked_at - changed <= timedelta(days=after_days)
            assert q.asked_at - now.valid_from <= timedelta(days=after_days)
        elif timing == "long_after":
            assert q.asked_at - changed >= timedelta(days=long_days)
        else:
            assert q.text.startswith(f"As of {date_phrase(q.asked_at)}, ")
            assert (q.asked_at.hour, q.asked_at.minute, q.asked_at.second) == (12, 0, 0)
            later = [d for d in versions if d.valid_from > q.asked_at]
            assert any(not contains_answer(d.text, q.answer) for d in later)  # replaced later
            assert q.meta["later_answers"]


# --- site policy --------------------------------------------------------------------------


def test_site_policy_questions_follow_the_versions_in_force(tmp_path: Path, site_raw: Path
                                                            ) -> None:  # fmt: skip
    capped = _load(site_policy.write(site_policy.SitePolicyConfig(), tmp_path / "capped",
                                      source=site_raw))
    assert max(Counter((q.doc_ids[0], q.meta["fact"]) for q in capped.queries).values()) <= 3
    cfg = site_policy.SitePolicyConfig(max_queries_per_fact=10)  # every candidate, to check
    ds = _load(site_policy.write(cfg, tmp_path / "out", source=site_raw))
    _check_queries(ds, cfg.after_change_days, cfg.long_after_days)
    assert {q.meta["timing"] for q in ds.queries} == {"after_change", "long_after", "as_of"}
    assert {q.doc_ids[0] for q in ds.queries} == {"privacy", "terms", "retention"}
    # "Effective date: <date>" chunks say nothing else: no such fact gives a question
    assert {q.meta["value_type"] for q in ds.queries} == {"duration", "percent"}
    assert not any("Effective date" in q.text for q in ds.queries)
    # the question quotes the sentence as the version in force writes it
    for q in ds.queries:
        now = [d for d in ds.corpus if d.doc_id == q.doc_ids[0] and d.valid_from <= q.asked_at]
        left = q.text.split('"')[1].split("___")[0].strip(" …").split()[-3:]
        assert " ".join(left) in " ".join(now[-1].text.split()), q.text
    # the deletion window: 30 -> 90 -> 60 days; asked right after the second change
    deletion = [q for q in ds.queries if "of your request" in q.text]
    assert all("within ___ of your request" in q.text and q.text.startswith(
        ("In the Privacy Policy, what fills the blank: ", "As of ")) for q in deletion)
    late = [q for q in deletion if q.meta["timing"] == "after_change"
            and q.asked_at.year == 2020]  # fmt: skip
    assert [(q.answer, q.stale_answers) for q in late] == [("60 days", ("30 days", "90 days"))]
    first = [q for q in deletion if q.meta["timing"] == "as_of" and q.asked_at.year == 2019
             and q.asked_at.month < 9]  # fmt: skip
    assert [(q.answer, q.stale_answers) for q in first] == [("30 days", ())]
    # the reworded refund sentence keeps its fact: 14 -> 21 -> 7 days
    refunds = sorted((q for q in ds.queries if q.doc_ids == ("terms",)), key=lambda q: q.ts)
    assert refunds[-1].answer == "7 days" and set(refunds[-1].stale_answers) == {
        "14 days", "21 days"}  # fmt: skip


def test_site_policy_times_are_repaired_like_the_loader(tmp_path: Path, site_raw: Path) -> None:
    out = site_policy.write(site_policy.SitePolicyConfig(), tmp_path / "out", source=site_raw)
    records = [json.loads(line) for line in (out / "corpus.jsonl").read_text().splitlines()]
    privacy = [r for r in records if r["doc_id"] == "privacy"]
    assert [r["valid_from"] for r in privacy] == [
        "2019-01-10T17:00:00Z", "2019-09-02T08:00:00Z", "2020-11-20T12:00:00Z",
        "2020-11-20T12:00:01Z", "2021-08-01T00:00:00Z"]  # fmt: skip
    assert [r["meta"].get("time_repaired", False) for r in privacy] == [
        False, False, False, True, False]  # fmt: skip
    assert privacy[3]["meta"]["committed_at"] == "2020-11-20T11:00:00+00:00"
    assert [r.get("valid_to") for r in privacy] == [r["valid_from"] for r in privacy[1:]] + [None]
    assert {r["source_type"] for r in records} == {"policy_doc"}
    assert all(r["meta"]["commit"] and r["meta"]["path"] for r in records)


def test_site_policy_finds_values() -> None:
    found = site_policy.find_values(
        "Within thirty (30) days, pay US $5,000.00 or 25% by July 2, 2019 (2019-07-02), "
        "for a 24-hour window of 13 years, fifty percent (50%) or 2 GB.")
    keys = [(v.kind, v.key) for v in found]
    assert keys == [
        ("duration", "day:30"), ("money", "usd:5000"), ("percent", "percent:25"),
        ("date", "2019-07-02"), ("date", "2019-07-02"), ("duration", "hour:24"),
        ("duration", "year:13"), ("percent", "percent:50"), ("size", "gb:2"),
    ]  # fmt: skip
    assert site_policy.find_values("Section 4 of the 2019 agreement.") == ()


def test_site_policy_cloze() -> None:
    sentence = "* **Refunds** are issued within 14 days of a [cancellation](/x)."
    start = sentence.index("14 days")
    assert site_policy.cloze(sentence, start, start + 7) == (
        "Refunds are issued within ___ of a cancellation.")
    words = " ".join(f"w{i}" for i in range(30))
    text = f"{words} 5 days {words}"
    long = site_policy.cloze(text, text.index("5 days"), text.index("5 days") + 6)
    assert long.startswith("… w10 ") and long.endswith(" w19 …") and "___" in long


def test_candidate_windows() -> None:
    def at(text: str) -> datetime:
        return datetime.fromisoformat(text)

    times = [at("2020-01-01T00:00:00+00:00"), at("2020-03-01T18:00:00+00:00"),
             at("2020-03-03T06:00:00+00:00"), at("2021-01-01T00:00:00+00:00")]  # fmt: skip
    fact = deriver.Fact("d", "f", ["a", "b", "c", "c"], ["1 day", "2 days", "3 days",
                                                            "3 days"])  # fmt: skip
    end = at("2022-01-01T00:00:00+00:00")
    runs = deriver.runs(fact, times, end)
    assert [(r.key, r.first, r.last, r.start, r.end, r.changed) for r in runs] == [
        ("a", 0, 0, times[0], times[1], False), ("b", 1, 1, times[1], times[2], True),
        ("c", 2, 3, times[2], end, True)]  # fmt: skip
    for seed in range(20):
        cfg = site_policy.SitePolicyConfig(seed=seed, after_change_days=30, long_after_days=60)
        got = {(c.run.key, c.timing): c for c in deriver.candidates(fact, times, end, cfg)}
        assert sorted(got) == [("a", "as_of"), ("b", "after_change"), ("b", "as_of"),
                               ("c", "after_change"), ("c", "long_after")]  # fmt: skip
        # b is in force for a day and a half: the only whole day is 2 March
        assert got["b", "as_of"].asked_at == at("2020-03-02T12:00:00+00:00")
        assert times[1] < got["b", "after_change"].asked_at < times[2]
        assert got["b", "after_change"].stale == ["1 day"] and got["b", "as_of"].later == [
            "3 days"]  # fmt: skip
        c_near, c_far = got["c", "after_change"], got["c", "long_after"]
        assert times[2] < c_near.asked_at < times[2] + timedelta(days=30)
        assert times[2] + timedelta(days=60) <= c_far.asked_at < end
        assert c_far.version == (3 if c_far.asked_at >= times[3] else 2)
        assert c_far.answer == "3 days"
        assert c_far.stale == ["1 day", "2 days"] and c_far.later == []
        assert times[0] < got["a", "as_of"].asked_at < times[1] - timedelta(hours=12)


# --- peps ---------------------------------------------------------------------------------


def test_peps_questions_follow_the_versions_in_force(tmp_path: Path, peps_raw: Path) -> None:
    cfg = peps.PepsConfig(max_queries_per_document=20, max_queries_per_fact=20)
    ds = _load(peps.write(cfg, tmp_path / "out", source=peps_raw))
    _check_queries(ds, cfg.after_change_days, cfg.long_after_days)
    assert {q.meta["field"] for q in ds.queries} == {"Status", "Python-Version", "Superseded-By"}
    assert {q.doc_ids[0] for q in ds.queries} == {"pep-0001", "pep-0002", "pep-0005"}
    # Superseded-By appears with the supersession: a change from no value, no stale answer
    superseded = [q for q in ds.queries if q.meta["field"] == "Superseded-By"]
    assert {(q.answer, q.stale_answers, q.text) for q in superseded} == {
        ("Superseded-By: 6", (), "Which PEP supersedes PEP 5 (Proposal 5)?")}
    assert {q.meta["timing"] for q in superseded} == {"after_change", "long_after"}
    status = [q for q in ds.queries if q.meta["field"] == "Status"]
    assert all(q.answer.startswith("Status: ") for q in status)
    final = [q for q in status if q.doc_ids == ("pep-0001",) and q.answer == "Status: Final"]
    assert final and all(q.stale_answers == ("Status: Draft", "Status: Accepted")
                         and q.text == "What is the status of PEP 1 (Proposal 1)?" for q in final)
    version = [q for q in ds.queries if q.meta["field"] == "Python-Version"
               and q.kind == "current"]  # fmt: skip
    assert [(q.answer, q.stale_answers, q.text) for q in version] == [
        ("Python-version: 3.6", ("Python-Version: 3.5",),
         "Which Python version is PEP 1 (Proposal 1) targeted at?")] * len(version) and version
    as_of = [q for q in ds.queries if q.kind == "as_of"]
    assert all(q.text.startswith("As of ") for q in as_of) and as_of
    records = [json.loads(line) for line in
               (tmp_path / "out" / "corpus.jsonl").read_text().splitlines()]  # fmt: skip
    assert {r["source_type"] for r in records} == {"technical_doc"}
    assert len(records) == len(_PEPS)


def test_peps_fields_are_configurable(tmp_path: Path, peps_raw: Path) -> None:
    cfg = peps.PepsConfig(fields=["Python-Version"], max_queries_per_fact=20)
    ds = _load(peps.write(cfg, tmp_path / "out", source=peps_raw))
    assert {q.meta["field"] for q in ds.queries} == {"Python-Version"}
    cfg = peps.PepsConfig(max_queries_per_fact=20, max_queries_per_document=20,
                          appearing_changes=False)  # fmt: skip
    ds = _load(peps.write(cfg, tmp_path / "strict", source=peps_raw))
    assert {q.meta["field"] for q in ds.queries} == {"Status", "Python-Version"}


# --- shared behaviour ---------------------------------------------------------------------

_CASES = [
    (site_policy, site_policy.SitePolicyConfig, "site_raw"),
    (peps, peps.PepsConfig, "peps_raw"),
]


@pytest.mark.parametrize(("module", "config", "raw"), _CASES)
def test_split_is_by_document(tmp_path: Path, module: Any, config: Any, raw: str,
                              request: pytest.FixtureRequest) -> None:  # fmt: skip
    source = request.getfixturevalue(raw)
    everything = _load(module.write(config(), tmp_path / "all", source=source))
    splits: dict[str, set[str]] = {}
    for q in everything.queries:
        splits.setdefault(q.doc_ids[0], set()).add(q.meta["split"])
    assert all(len(s) == 1 for s in splits.values())  # no document in both
    assert {s for ss in splits.values() for s in ss} == {"dev", "test"}
    for split in ("dev", "test"):
        part = _load(module.write(config(split=split), tmp_path / split, source=source))
        assert part.queries == [q for q in everything.queries if q.meta["split"] == split]
        assert part.corpus == everything.corpus  # the corpus is never split


@pytest.mark.parametrize(("module", "config", "raw"), _CASES)
def test_deterministic(tmp_path: Path, module: Any, config: Any, raw: str,
                       request: pytest.FixtureRequest) -> None:  # fmt: skip
    source = request.getfixturevalue(raw)
    a = module.write(config(), tmp_path / "a", source=source)
    b = module.write(config(), tmp_path / "b", source=source)
    c = module.write(config(seed=1), tmp_path / "c", source=source)
    for name in ("corpus.jsonl", "queries.jsonl"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert (a / "corpus.jsonl").read_bytes() == (c / "corpus.jsonl").read_bytes()
    assert (a / "queries.jsonl").read_bytes() != (c / "queries.jsonl").read_bytes()


@pytest.mark.parametrize(("module", "config", "raw"), _CASES)
def test_timing_mix_and_caps(tmp_path: Path, module: Any, config: Any, raw: str,
                             request: pytest.FixtureRequest) -> None:  # fmt: skip
    source = request.getfixturevalue(raw)
    only = _load(module.write(config(long_after_share=0, as_of_share=0), tmp_path / "a",
                              source=source))  # fmt: skip
    assert only.queries and {q.meta["timing"] for q in only.queries} == {"after_change"}
    capped = _load(module.write(config(max_queries=3), tmp_path / "b", source=source))
    assert len(capped.queries) == 3
    assert len({q.meta["timing"] for q in capped.queries}) == 3  # one of each, by the mix
    per_doc = _load(module.write(config(max_queries_per_document=1), tmp_path / "c",
                                 source=source))  # fmt: skip
    docs = [q.doc_ids[0] for q in per_doc.queries]
    assert len(docs) == len(set(docs)) > 1
    small = _load(module.write(config(max_documents=1), tmp_path / "d", source=source))
    assert len(small.doc_ids()) == 1 and small.queries  # a document with questions is kept


@pytest.mark.parametrize(("module", "config"), [(m, c) for m, c, _ in _CASES])
@pytest.mark.parametrize(("changes", "key"), [
    ({"split": "train"}, "split"),
    ({"seed": 1.5}, "seed"),
    ({"dev_fraction": 1.5}, "dev_fraction"),
    ({"as_of_share": -1.0}, "as_of_share"),
    ({"long_after_share": float("nan")}, "long_after_share"),
    ({"after_change_share": 0.0, "long_after_share": 0.0, "as_of_share": 0.0},
     "after_change_share"),
    ({"after_change_days": 0}, "after_change_days"),
    ({"long_after_days": -3}, "long_after_days"),
    ({"max_queries": 0}, "max_queries"),
    ({"max_queries_per_document": 0}, "max_queries_per_document"),
    ({"max_queries_per_fact": 0}, "max_queries_per_fact"),
    ({"max_documents": 0}, "max_documents"),
    ({"kind": "jsonl"}, "kind"),
])  # fmt: skip
def test_validate_names_the_key(module: Any, config: Any, changes: dict[str, Any], key: str
                                ) -> None:  # fmt: skip
    module.validate(config())
    with pytest.raises(ValueError) as info:
        module.validate(config(**changes))
    message = str(info.value)
    assert re.match(rf"{key}\b", message) and "\n" not in message


@pytest.mark.parametrize(("module", "config", "changes", "key"), [
    (site_policy, site_policy.SitePolicyConfig, {"min_similarity": 0.0}, "min_similarity"),
    (peps, peps.PepsConfig, {"fields": ["Status", "Colour"]}, "fields"),
    (peps, peps.PepsConfig, {"fields": []}, "fields"),
])  # fmt: skip
def test_validate_own_keys(module: Any, config: Any, changes: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=f"^{key} "):
        module.validate(config(**changes))


def test_missing_raw_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"nope\.jsonl\.gz: raw version history not found"):
        site_policy.write(site_policy.SitePolicyConfig(), tmp_path / "o",
                          source=tmp_path / "nope.jsonl.gz")  # fmt: skip
    assert deriver.raw_path("site_policy").parts[-3:] == (
        "datasets", "site_policy", "versions.jsonl.gz")  # fmt: skip


def test_cli(tmp_path: Path, site_raw: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--out", str(tmp_path / "o"), "--source", str(site_raw), "--stats"]
    assert site_policy.main(argv) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["documents"] == 5 and stats["versions"] == len(_SITE)
    assert stats["queries"] == len(_load(tmp_path / "o").queries)
    assert sum(stats["queries_by_timing"].values()) == stats["queries"]
    assert site_policy.main(["--out", str(tmp_path / "p"), "--source", "nope"]) == 2
    assert capsys.readouterr().err.startswith("error: nope: raw version history not found")


# --- the real files -----------------------------------------------------------------------


@pytest.mark.parametrize(("module", "config", "expected"), [
    (site_policy, site_policy.SitePolicyConfig, (96, 1214, 39)),
    (peps, peps.PepsConfig, (742, 5160, 300)),
])  # fmt: skip
def test_default_configs_on_the_shipped_files(tmp_path: Path, module: Any, config: Any,
                                              expected: tuple[int, int, int]) -> None:  # fmt: skip
    ds = _load(module.write(config(), tmp_path / "out"))
    assert (len(ds.doc_ids()), len(ds.corpus), len(ds.queries)) == expected  # the cards' numbers
    assert all(_chunks_with(_in_force(ds, q).text, q.answer) == 1 for q in ds.queries)
