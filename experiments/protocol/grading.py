"""Answer matching and grading, identical for every corpus and every method."""

from __future__ import annotations

import re
from collections.abc import Collection
from enum import StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from experiments.data.dataset import Query

_WHITESPACE = re.compile(r"\s+")
_ALNUM = r"[^\W_]"  # a letter or digit in any script (``\w`` without the underscore)


@lru_cache(maxsize=8192)
def normalise(text: str) -> str:
    """Casefold, collapse every whitespace run to one space, strip."""
    return _WHITESPACE.sub(" ", text.casefold()).strip()


@lru_cache(maxsize=4096)
def _answer_pattern(answer: str) -> re.Pattern[str] | None:
    """Regex finding the normalised ``answer`` as a bounded match (None if it is empty)."""
    if not answer:
        return None
    before = after = ""
    if answer[0].isalnum():
        before = rf"(?<!{_ALNUM})"
        if answer[0].isdecimal():
            before += r"(?<!\d[.,])"
    if answer[-1].isalnum():
        after = rf"(?!{_ALNUM})"
        if answer[-1].isdecimal():
            after += r"(?![.,]\d)"
    return re.compile(before + re.escape(answer) + after)


@lru_cache(maxsize=1 << 16)
def contains_answer(text: str, answer: str) -> bool:
    """Whether ``text`` states ``answer``: case-insensitive, whitespace-normalised, bounded.

    Both sides are ``normalise``d. The match must not continue a word or number: where the
    answer starts (ends) with a letter or digit, the character just before (after) the match
    must not be a letter or digit; where it starts (ends) with a digit, the character before
    (after) also must not be a ``.``/``,`` that is itself preceded (followed) by a digit. So
    "4 MB" is not in "14 MB", "30 days" not in "130 days", "5" not in "5.5", "2.5" or "1,5",
    but "90 days" is in "every 90 days.", "(90 days)", "90 days," and "5" in "was 5.".
    An answer that normalises to nothing matches nothing. Remembered per (text, answer):
    a run's methods grade mostly the same chunks against the same answers.
    """
    pattern = _answer_pattern(normalise(answer))
    return pattern is not None and pattern.search(normalise(text)) is not None


class Grade(StrEnum):
    CORRECT = "correct"
    STALE = "stale"
    CONTRADICTED = "contradicted"
    WRONG = "wrong"


def grade(text: str, doc_id: str, injected: bool, query: Query,
          contradicts: Collection[str] | None = None) -> Grade:
    """Grade one retrieved chunk (``text`` from ``doc_id``) against ``query``.

    In this order: CORRECT if ``doc_id`` is one of the query's ``doc_ids`` and the text
    contains the answer; STALE if it contains a stale answer and not the answer; CONTRADICTED
    if the chunk is an injected contradiction of one of the query's documents; otherwise
    WRONG. ``contradicts`` lists the documents an injected chunk contradicts
    (``meta.contradicts`` in the corpus): an injected chunk about another topic is WRONG.
    Without it (older datasets) every injected chunk counts as contradicting. So a rumor that
    states a stale value is STALE, an on-topic rumor stating neither value is CONTRADICTED,
    and the answer found in a document outside ``doc_ids`` is never CORRECT.
    """
    has_answer = contains_answer(text, query.answer)
    if has_answer and doc_id in query.doc_ids:
        return Grade.CORRECT
    if not has_answer and any(contains_answer(text, s) for s in query.stale_answers):
        return Grade.STALE
    if injected and (contradicts is None or not set(query.doc_ids).isdisjoint(contradicts)):
        return Grade.CONTRADICTED
    return Grade.WRONG
