"""Answer matching (``experiments.protocol.answers``): what a person would accept, and not."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.protocol.answers import contains_answer, normalise

# (text, answer, expected)
CASES = [
    # --- bounded matching, as before ---
    ("the limit is 14 MB", "4 MB", False),
    ("it is 4 MB.", "4 MB", True),
    ("logs are kept 130 days", "30 days", False),
    ("version 5.5", "5", False),
    ("version 2.5", "5", False),
    ("uptime is 99.95% this year", "99.9%", False),
    ("the answer was 5.", "5", True),
    ("keys rotate every 90 days.", "90 days", True),
    ("Rotate Every  90\n\tDAYS", "every 90 days", True),
    ("port 80801", "8080", False),
    # --- 1. thousands separators ---
    ("a fine of $1,000 applies", "$1000", True),
    ("a fine of $1000 applies", "$1,000", True),
    ("up to $1,000,000 per claim", "$1000000", True),
    ("capped at 12,500 requests", "12500 requests", True),
    ("costs 1,500 euros", "500 euros", False),
    ("costs 11,000 euros", "1,000 euros", False),
    ("1,5 litres", "5", False),
    ("1,50 litres", "150", False),
    ("1,000,00 units", "1000", False),
    ("paid 1,000.50 in total", "1000.50", True),
    # --- 2. number words beside the same number ---
    ("within thirty (30) days", "30 days", True),
    ("within 30 (thirty) days", "30 days", True),
    ("within thirty (30) days", "thirty days", False),  # collapsed to the digits
    ("within thirty (31) days", "30 days", False),
    ("within thirty (31) days", "31 days", False),
    ("within forty-five (45) days", "45 days", True),
    ("within forty five (45) days", "45 days", True),
    ("twenty-one (21) days", "1 days", False),
    ("within one hundred and twenty (120) days", "120 days", True),
    ("one of the admins", "1 of", False),  # bare number words stay words
    ("one of the admins", "one of", True),
    ("Seventeen(17) seats", "17 seats", True),
    # --- 3. hyphenated units and plurals ---
    ("a 30-day period", "30 days", True),
    ("for 30 days", "30-day", True),
    ("a 12-month term", "12 months", True),
    ("in the 12 month period", "12 months", True),
    ("a 90-day notice", "90 day", True),
    ("a 130-day period", "30 days", False),
    ("every 90 days", "every 90 day", True),
    ("replies within 30 ms", "30 m", False),
    ("holds 5 glass jars", "5 glas jars", False),  # "ss" is no plural
    ("it was 5 days", "5 day", True),
    # --- 4. dates ---
    ("effective May 25, 2018.", "2018-05-25", True),
    ("effective May 25 2018", "2018-05-25", True),
    ("effective May 25th, 2018", "May 25, 2018", True),
    ("effective 25 May 2018", "May 25, 2018", True),
    ("effective the 25th of May, 2018", "2018-05-25", True),
    ("effective Sept. 5, 2019", "September 5, 2019", True),
    ("effective 5 Sep 2019", "2019-09-05", True),
    ("effective Dec 1st 2020", "2020-12-01", True),
    ("effective 2018-05-25", "May 25, 2018", True),
    ("updated 2018-05-25T00:00:00Z", "2018-05-25", True),
    ("updated 2018-05-25T00:00:00Z", "2018-05-25T00:00:00Z", True),
    ("effective May 25, 2019", "2018-05-25", False),
    ("effective May 25, 2018", "2018-05-26", False),
    ("build 2018-05-250", "2018-05-25", False),
    ("build 12018-05-25", "2018-05-25", False),
    ("due Feb 30, 2020", "Feb 30, 2020", True),  # invalid: stays as written
    ("due Feb 30, 2020", "2020-02-30", False),
    ("a mayor 25 2018 vote", "2018-05-25", False),
    ("version 1.25 May 2018", "2018-05-25", False),
]


@pytest.mark.parametrize(("text", "answer", "expected"), CASES)
def test_cases(text: str, answer: str, expected: bool) -> None:
    assert contains_answer(text, answer) is expected


# --- the bounded match: near misses and accepted forms ------------------------------------

@pytest.mark.parametrize(("text", "answer"), [
    ("the limit is 14 MB", "4 MB"), ("uptime is 99.95% this year", "99.9%"),
    ("logs are kept 130 days", "30 days"), ("version 5.5", "5"), ("version 2.5", "5"),
    ("1,5 litres", "5"), ("5,1 litres", "5"), ("costs 1,500 euros", "500 euros"), ("v15", "5"),
    ("port 80801", "8080"), ("the keys rotate", "key"), ("monkey", "key"), ("", "5"),
])  # fmt: skip
def test_bounded_non_matches(text: str, answer: str) -> None:
    assert not contains_answer(text, answer)


@pytest.mark.parametrize(("text", "answer"), [
    ("keys rotate every 90 days.", "90 days"), ("rotation (90 days) is enforced", "90 days"),
    ("90 days, then deleted", "90 days"), ("rotation happens after 90 days", "90 days"),
    ("90 days", "90 days"), ("the answer was 5.", "5"), ("the answer was 5, then 6", "5"),
    ("limits: 5; quotas: 6", "5"), ("it is 4 MB.", "4 MB"), ("uptime 99.9%.", "99.9%"),
    ("uptime 99.9%5", "99.9%"), ("costs US$5 per seat", "$5"), ("x.5 is odd", "5"),
    ("Rotate Every  90\n\tDAYS", "every 90 days"), ("STRASSE 5", "straße 5"),
    ("tab\tseparated", "  tab separated  "),
])  # fmt: skip
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
    assert normalise("Thirty (30) days, a 12-month term") == "30 day, a 12 month term"
    assert normalise("$1,000,000 on May 25th, 2018") == "$1000000 on 2018-05-25"
    assert normalise("2018-05-25T10:00:00Z") == "2018-05-25 t10:00:00z"
    assert normalise("one of five") == "one of five"


# --- property: an answer is found in itself ----------------------------------------------

_PIECES = list("0123456789 ,.-()tTsSx%$\n") + [
    "May ", "Sept. ", "25th ", "of ", "thirty ", "(30) ", "days", "2018", "one", "12,500",
]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=12).map("".join))
def test_an_answer_is_found_in_itself(x: str) -> None:
    if x.strip():
        assert contains_answer(x, x)
