"""The re-embedding study's one-word edits (experiments.protocol.reembed): what an edit
changes, and the seeded edits and costs pinned (values from the first implementation, so
that a faster one must draw the same edits)."""

from __future__ import annotations

import random
import re

from experiments.protocol.reembed import one_word_edit, text_edit_costs
from experiments.studies.reembed_study import documents

TEXT = "Refunds are issued within thirty days of purchase, unless the item was damaged in transit."


def test_an_edit_replaces_one_word_by_a_word_of_the_text_of_another_length() -> None:
    for seed in range(20):
        edited = one_word_edit(TEXT, random.Random(seed))
        assert edited is not None
        before, after = re.findall(r"\w+|\W+", TEXT), re.findall(r"\w+|\W+", edited)
        changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
        assert len(changed) == 1
        (old, new), = changed
        assert len(old) != len(new) and new in before


def test_texts_that_cannot_be_edited_give_none() -> None:
    rng = random.Random(0)
    assert one_word_edit("", rng) is None
    assert one_word_edit("one", rng) is None  # fewer than two words of 3+ letters
    assert one_word_edit("an ox is", rng) is None  # no word of 3+ letters but one
    assert one_word_edit("aaa bbb ccc", rng) is None  # every word has the same length


def test_seeded_edits_and_costs_are_pinned() -> None:
    assert [one_word_edit(TEXT, random.Random(s)) for s in range(3)] == [
        "Refunds are issued within thirty days of the, unless the item was damaged in transit.",
        "Refunds are are within thirty days of purchase, unless the item was damaged in transit.",
        "days are issued within thirty days of purchase, unless the item was damaged in transit.",
    ]
    assert text_edit_costs(documents(20, 5, 0), 30, 0, 500, 50) == {
        "reembed_full_reindex": 20.0, "reembed_hash_dedup_paragraph": 1.0,
        "reembed_full_reindex_window": 10.0, "reembed_hash_dedup_window": 5.7,
        "reembed_surgical": 1.0, "reembed_edits": 30.0}
