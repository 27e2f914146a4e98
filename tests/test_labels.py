"""Relevance labels at the question's time, the checks of labels that cannot be right, the
ranking metrics computed from them, and their agreement with the top-1 grades."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import ir_measures
import pandas as pd
import pytest
from ir_measures import P

from experiments.data.dataset import Dataset, DocVersion, Query, load_dataset, write_dataset
from experiments.data.policy_synth import PolicySynthConfig, generate
from experiments.methods import RankedHit, Ranking
from experiments.protocol.grading import Grade, grade
from experiments.protocol.labels import (
    LabelProblemWarning,
    label_dataset,
    qrels_lines,
    write_labels,
)
from experiments.protocol.ranking import as_trec, chunk_run, per_query, run_lines
from experiments.protocol.replay import ReplayResult, injected_docs


def _t(month: int, year: int = 2024) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _corpus() -> list[DocVersion]:
    return [
        DocVersion("a", 1, "Retention: 30 days.\n\nContact: ops.", _t(1)),
        DocVersion("a", 2, "Retention: 90 days.\n\nContact: ops.", _t(6)),
        DocVersion("b", 1, "Backups are kept 30 days.", _t(1)),
        DocVersion("rumor", 1, "I heard retention is 7 days.", _t(7),
                   meta={"injected": True, "contradicts": ["a"]}),
    ]


def _q(qid: str, month: int, answer: str, stale: tuple[str, ...] = (), year: int = 2024,
       doc_ids: tuple[str, ...] = ("a",)) -> Query:
    return Query(qid, "how long is retention?", _t(month, year), doc_ids, answer, stale)


def _labelled(*queries: Query) -> tuple[Dataset, object]:
    return label_dataset(Dataset(_corpus(), list(queries)), 500)


def test_labels_at_the_question_s_time() -> None:
    _, labels = _labelled(_q("now", 8, "90 days", ("30 days",)), _q("then", 3, "30 days"))
    now, then = labels.by_query["now"], labels.by_query["then"]
    c = labels.chunks
    assert c.texts["a#1"] == "Retention: 30 days." and c.texts["a#3"] == "Retention: 90 days."
    assert c.texts["a#2"] == "Contact: ops."  # unchanged by the edit: one chunk, one id
    assert now.relevant == {"a#3"} and now.correct == {"a#3"} and now.stale == {"a#1"}
    assert now.in_force == {"a#2", "a#3"} and now.document == {"a"}
    assert now.contradicted == {"rumor#1"}
    # "b" states 30 days too, but it is another document: never stale for this query
    assert "b#1" not in now.stale
    assert then.relevant == {"a#1"} and then.in_force == {"a#1", "a#2"} and not then.stale


def test_labels_agree_with_the_top1_grades_on_a_generated_corpus(tmp_path) -> None:
    ds = load_dataset(write_dataset(generate(PolicySynthConfig(seed=3, contradiction_rate=0.5)),
                                    tmp_path))
    ds, labels = label_dataset(ds, 500)
    injected = injected_docs(ds)
    names = {Grade.CORRECT: "correct", Grade.STALE: "stale",
             Grade.CONTRADICTED: "contradicted"}
    checked = 0
    for q in ds.queries:
        lab = labels.by_query[q.id]
        for cid, text in labels.chunks.texts.items():
            doc = labels.chunks.doc_of[cid]
            g = grade(text, doc, doc in injected, q, injected.get(doc))
            for grade_, name in names.items():
                assert (g is grade_) == (cid in getattr(lab, name)), (q.id, cid, g)
            checked += 1
    assert checked > 10_000


@pytest.mark.parametrize(("query", "reason"), [
    (_q("early", 6, "30 days", year=2023), "asked before any of its documents exists"),
    (_q("dup", 8, "90 days", ("90 Days",)), "also listed among its stale answers"),
    (_q("later", 3, "90 days", ("30 days",)), "stated only by versions not in force then"),
    (_q("split", 8, "90 days. Contact"), "no single chunk of its documents states it"),
    (_q("everywhere", 8, "Retention", ("30 days",)),
     "every chunk stating a stale answer also states the answer"),
])
def test_labels_that_cannot_be_right_are_left_out_and_counted(query: Query, reason: str
                                                              ) -> None:
    good = _q("good", 8, "90 days", ("30 days",))
    with pytest.warns(LabelProblemWarning, match=f"left out 1 of 2 queries.*{query.id}: "):
        ds, labels = _labelled(good, query)
    assert [q.id for q in ds.queries] == ["good"]
    assert [q.id for q in ds.excluded] == [query.id]
    assert len(labels.problems) == 1 and reason in labels.problems[0][1]
    assert ds.unanswerable == labels.problems


def test_written_labels_are_the_field_s_formats(tmp_path) -> None:
    ds, labels = _labelled(_q("now", 8, "90 days", ("30 days",)))
    write_labels(tmp_path, ds, labels)
    qrels = ir_measures.read_trec_qrels(str(tmp_path / "qrels" / "relevant.txt"))
    assert [(q.query_id, q.doc_id, q.relevance) for q in qrels] == [("now", "a#3", 1)]
    assert (tmp_path / "qrels" / "stale.txt").read_text() == "now 0 a#1 1\n"
    assert (tmp_path / "beir" / "qrels" / "test.tsv").read_text().splitlines() == [
        "query-id\tcorpus-id\tscore", "now\ta#3\t1"]
    corpus = pd.read_json(tmp_path / "beir" / "corpus.jsonl", lines=True)
    assert list(corpus.columns) == ["_id", "title", "text"] and len(corpus) == 5
    assert "".join(qrels_lines(labels, "document")) == "now 0 a 1\n"


def _hit(doc: str, text: str) -> RankedHit:
    return RankedHit(f"v-{doc}-{len(text)}", doc, text, 0.5)


def test_ranking_metrics_and_the_two_stages() -> None:
    qs = [_q("found", 8, "90 days", ("30 days",)), _q("stale_first", 8, "90 days", ("30 days",)),
          _q("other_doc", 8, "90 days", ("30 days",)), _q("empty", 8, "90 days", ("30 days",))]
    _, labels = _labelled(*qs)
    result = ReplayResult("m", run=[
        (qs[0], Ranking([_hit("a", "Retention: 90 days."), _hit("b", "Backups are kept 30 days.")],
                        0.9)),
        (qs[1], Ranking([_hit("b", "Backups are kept 30 days."), _hit("a", "Retention: 30 days."),
                         _hit("a", "Retention: 90 days.")], 0.5)),
        (qs[2], Ranking([_hit("b", "Backups are kept 30 days."), _hit("x", "foreign text")], 0.1)),
        (qs[3], Ranking([], 0.0)),
    ])
    frame = per_query(result, labels)
    assert frame.loc["found", "ndcg_at_10"] == 1.0 and frame.loc["found", "recall_at_1"] == 1.0
    assert frame.loc["stale_first", "recall_at_1"] == 0.0
    assert frame.loc["stale_first", "recall_at_5"] == 1.0
    assert frame.loc["stale_first", "mrr_at_10"] == pytest.approx(1 / 3)
    assert frame.loc["stale_first", "ndcg_at_10"] == pytest.approx(1 / math.log2(4))
    # document recall: the right document at rank 2; its first chunk is not in force
    assert frame.loc["stale_first", "doc_recall_at_1"] == 0.0
    assert frame.loc["stale_first", "doc_recall_at_5"] == 1.0
    assert frame.loc["stale_first", "doc_rank"] == 2
    assert not frame.loc["stale_first", "doc_hit_in_force"]
    assert frame.loc["found", "doc_rank"] == 1 and frame.loc["found", "doc_hit_in_force"]
    for qid in ("other_doc", "empty"):  # nothing of the right document: zeros, rank 0
        assert frame.loc[qid, "doc_rank"] == 0 and frame.loc[qid, "doc_recall_at_10"] == 0.0
        assert frame.loc[qid, "ndcg_at_10"] == 0.0
    # the run file: our order, strictly decreasing scores, a foreign chunk its own id
    lines = "".join(run_lines(chunk_run(result, labels), "m")).splitlines()
    assert lines[2:5] == ["stale_first Q0 b#1 1 3 m", "stale_first Q0 a#1 2 2 m",
                          "stale_first Q0 a#3 3 1 m"]
    assert lines[-1].startswith("other_doc Q0 x#x") and lines[-1].endswith(" 2 1 m")


def test_top1_rates_recomputed_by_the_library_from_run_and_qrels() -> None:
    """P@1 against the ``correct``/``stale`` qrels is the share of top-1 grades."""
    qs = [_q("found", 8, "90 days", ("30 days",)), _q("stale_first", 8, "90 days", ("30 days",))]
    _, labels = _labelled(*qs)
    result = ReplayResult("m", run=[
        (qs[0], Ranking([_hit("a", "Retention: 90 days.")], 0.9)),
        (qs[1], Ranking([_hit("a", "Retention: 30 days.")], 0.9))])
    run = as_trec(chunk_run(result, labels))
    for name, expected in (("correct", {"found": 1.0}), ("stale", {"stale_first": 1.0})):
        qrels = {q: dict.fromkeys(getattr(labels.by_query[q], name), 1) for q in run}
        got = {m.query_id: m.value for m in ir_measures.iter_calc([P @ 1], qrels, run)}
        assert {q: v for q, v in got.items() if v} == expected


def test_a_dataset_round_trip_keeps_the_labels(tmp_path) -> None:
    ds = Dataset(_corpus(), [_q("now", 8, "90 days", ("30 days",))])
    write_dataset(ds, tmp_path / "d")
    again, labels = label_dataset(load_dataset(tmp_path / "d"), 500)
    assert labels.by_query["now"].relevant == {"a#3"} and len(again.queries) == 1
