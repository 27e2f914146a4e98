from __future__ import annotations

from datetime import UTC, datetime

import pytest

from experiments.data.dataset import Query
from experiments.protocol.answers import contains_answer, normalise
from experiments.protocol.grading import Grade, grade


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("the limit is 14 MB", "4 MB"),
        ("uptime is 99.95% this year", "99.9%"),
        ("logs are kept 130 days", "30 days"),
        ("version 5.5", "5"),
        ("version 2.5", "5"),
        ("1,5 litres", "5"),
        ("5,1 litres", "5"),
        ("costs 1,500 euros", "500 euros"),
        ("v15", "5"),
        ("port 80801", "8080"),
        ("the keys rotate", "key"),
        ("monkey", "key"),
        ("", "5"),
    ],
)
def test_bounded_non_matches(text: str, answer: str) -> None:
    assert not contains_answer(text, answer)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("keys rotate every 90 days.", "90 days"),
        ("rotation (90 days) is enforced", "90 days"),
        ("90 days, then deleted", "90 days"),
        ("rotation happens after 90 days", "90 days"),
        ("90 days", "90 days"),
        ("the answer was 5.", "5"),
        ("the answer was 5, then 6", "5"),
        ("limits: 5; quotas: 6", "5"),
        ("it is 4 MB.", "4 MB"),
        ("uptime 99.9%.", "99.9%"),
        ("uptime 99.9%5", "99.9%"),  # answer ends with '%': no boundary needed after it
        ("costs US$5 per seat", "$5"),  # answer starts with '$': no boundary needed before
        ("x.5 is odd", "5"),  # '.' not preceded by a digit
        ("Rotate Every  90\n\tDAYS", "every 90 days"),
        ("STRASSE 5", "straße 5"),  # casefold
        ("tab\tseparated", "  tab separated  "),
    ],
)
def test_bounded_matches(text: str, answer: str) -> None:
    assert contains_answer(text, answer)


def test_empty_or_blank_answer_matches_nothing() -> None:
    assert not contains_answer("anything", "")
    assert not contains_answer("anything", "  \n ")


def test_regex_metacharacters_are_literal() -> None:
    assert contains_answer("costs (a+b)*2 units", "(a+b)*2")
    assert not contains_answer("costs aab2 units", "a+b")


def test_normalise() -> None:
    assert normalise("  Hello \t\n  WORLD  ") == "hello world"
    assert normalise("Straße") == "strasse"
    assert normalise("") == ""


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
