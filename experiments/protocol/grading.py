"""Grading of one retrieved chunk, identical for every corpus and every method (answer
matching: :mod:`experiments.protocol.answers`)."""

from __future__ import annotations

from collections.abc import Collection
from enum import StrEnum
from typing import TYPE_CHECKING

from experiments.protocol.answers import contains_answer

if TYPE_CHECKING:
    from experiments.data.dataset import Query

class Grade(StrEnum):
    CORRECT = "correct"
    STALE = "stale"
    CONTRADICTED = "contradicted"
    WRONG = "wrong"  # a chunk of the query's own documents stating neither value
    OTHER_DOCUMENT = "other_document"


def grade(text: str, doc_id: str, injected: bool, query: Query,
          contradicts: Collection[str] | None = None) -> Grade:
    """Grade one retrieved chunk (``text`` from ``doc_id``) against ``query``.

    For a chunk of one of the query's ``doc_ids`` (its own documents): CORRECT if the text
    states the answer; STALE if it states a stale answer and not the answer (a superseded
    value of the query's own document); otherwise WRONG. For a chunk of another document:
    CONTRADICTED if it is an injected contradiction of one of the query's documents
    (``contradicts`` lists the documents an injected chunk contradicts, ``meta.contradicts``
    in the corpus; without it every injected chunk counts as contradicting), otherwise
    OTHER_DOCUMENT, whatever value it states: a stale value found in another document is
    not staleness, and the answer found there is never CORRECT.
    """
    if doc_id in query.doc_ids:
        if contains_answer(text, query.answer):
            return Grade.CORRECT
        if any(contains_answer(text, s) for s in query.stale_answers):
            return Grade.STALE
        return Grade.WRONG
    if injected and (contradicts is None or not set(query.doc_ids).isdisjoint(contradicts)):
        return Grade.CONTRADICTED
    return Grade.OTHER_DOCUMENT
