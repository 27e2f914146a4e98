"""The shared grade of one retrieved chunk (the answer matcher's tests: tests/test_answers.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from experiments.data.dataset import Query
from experiments.protocol.grading import Grade, grade


def _query(**kw: object) -> Query:
    base: dict = dict(
        id="q",
        text="how long?",
        asked_at=datetime(2024, 1, 1, tzinfo=UTC),
        doc_ids=("a",),
        answer="90 days",
        stale_answers=("30 days",),
    )
    base.update(kw)
    return Query(**base)


def test_grade_values() -> None:
    assert [g.value for g in Grade] == ["correct", "stale", "contradicted", "wrong",
                                        "other_document"]
    assert Grade.CORRECT == "correct"


def test_grade_correct_needs_the_right_document() -> None:
    q = _query()
    assert grade("kept for 90 days", "a", False, q) is Grade.CORRECT
    assert grade("kept for 90 days", "b", False, q) is Grade.OTHER_DOCUMENT
    assert grade("kept for 90 days", "b", True, q) is Grade.CONTRADICTED


def test_grade_correct_wins_over_stale_and_injected() -> None:
    q = _query()
    assert grade("was 30 days, now 90 days", "a", False, q) is Grade.CORRECT
    assert grade("was 30 days, now 90 days", "a", True, q) is Grade.CORRECT


def test_grade_stale_only_for_the_query_s_own_documents() -> None:
    q = _query()
    assert grade("kept for 30 days", "a", False, q) is Grade.STALE
    # another document stating an old value of this one's is not staleness
    assert grade("kept for 30 days", "b", False, q) is Grade.OTHER_DOCUMENT
    # a rumor stating the stale value contradicts the document
    assert grade("I heard 30 days", "rumor", True, q) is Grade.CONTRADICTED
    assert grade("30 days or 90 days", "b", False, q) is Grade.OTHER_DOCUMENT


def test_grade_contradicted_and_wrong() -> None:
    q = _query()
    assert grade("kept for 45 days", "rumor", True, q) is Grade.CONTRADICTED
    assert grade("kept for 45 days", "a", False, q) is Grade.WRONG
    assert grade("kept for 130 days", "a", False, q) is Grade.WRONG  # bounded, not stale


def test_grade_is_case_and_whitespace_insensitive() -> None:
    q = _query(answer="90 Days")
    assert grade("KEPT FOR 90\n   DAYS.", "a", False, q) is Grade.CORRECT


def test_injected_chunks_contradict_only_their_own_topic() -> None:
    q = Query("q", "how long?", datetime(2024, 6, 1, tzinfo=UTC), ("a",), "90 days",
              ("30 days",))
    rumor = "heard retention is 7 days now"
    # on topic: the rumor names the query's document as the one it contradicts
    assert grade(rumor, "rumor", True, q, ("a",)) is Grade.CONTRADICTED
    # off topic: an injected chunk about another document is another document's
    assert grade(rumor, "rumor", True, q, ("b",)) is Grade.OTHER_DOCUMENT
    assert grade(rumor, "rumor", True, q, ()) is Grade.OTHER_DOCUMENT
    # older datasets without meta.contradicts: every injected chunk contradicts
    assert grade(rumor, "rumor", True, q, None) is Grade.CONTRADICTED
    # an off-topic rumor stating this query's stale value is still another document's
    assert grade("heard it is 30 days", "rumor", True, q, ("b",)) is Grade.OTHER_DOCUMENT
