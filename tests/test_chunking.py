"""Paragraph chunking with source offsets, sentence splitting, and chunk diffs."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smartvector.chunking import Chunk, chunk_text, diff_chunks, fixed_window_chunks, text_hash


def texts(chunks: list[Chunk]) -> list[str]:
    return [c.text for c in chunks]


def assert_offsets(text: str, chunks: list[Chunk]) -> None:
    for i, c in enumerate(chunks):
        assert c.index == i
        assert text[c.start:c.end] == c.text
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert a.end <= b.start


def test_paragraphs_split_on_blank_lines():
    text = "First para.\n\nSecond para\nstill second.\n\n\n\nThird."
    chunks = chunk_text(text)
    assert texts(chunks) == ["First para.", "Second para\nstill second.", "Third."]
    assert [(c.start, c.end) for c in chunks] == [(0, 11), (13, 38), (42, 48)]
    assert_offsets(text, chunks)


def test_surrounding_whitespace_is_not_part_of_a_chunk():
    text = "  \n\n  Hello world.  \n \t \n  Second para.\n"
    chunks = chunk_text(text)
    assert texts(chunks) == ["Hello world.", "Second para."]
    assert_offsets(text, chunks)


def test_empty_or_blank_text_has_no_chunks():
    assert chunk_text("") == []
    assert chunk_text(" \n\n \t ") == []


def test_max_chars_must_be_positive():
    with pytest.raises(ValueError, match="max_chars"):
        chunk_text("abc", 0)


def test_long_paragraph_splits_at_sentence_ends():
    text = "One two three. Four five six. Seven eight nine."
    chunks = chunk_text(text, max_chars=30)
    assert texts(chunks) == ["One two three. Four five six.", "Seven eight nine."]
    assert all(len(c.text) <= 30 for c in chunks)
    assert_offsets(text, chunks)


def test_long_paragraph_offsets_inside_a_document():
    para = "Alpha beta gamma. Delta epsilon! Zeta eta theta? Iota kappa."
    text = f"Intro.\n\n{para}\n\nOutro."
    chunks = chunk_text(text, max_chars=20)
    assert texts(chunks) == [
        "Intro.", "Alpha beta gamma.", "Delta epsilon!", "Zeta eta theta?", "Iota kappa.",
        "Outro."]
    assert_offsets(text, chunks)


def test_paragraph_without_sentence_ends_splits_at_spaces_then_hard():
    assert texts(chunk_text("aaaa bbbb cccc dddd", 10)) == ["aaaa bbbb", "cccc dddd"]
    assert texts(chunk_text("abcdefghij", 4)) == ["abcd", "efgh", "ij"]


def test_short_paragraph_is_one_chunk_even_with_sentences():
    assert texts(chunk_text("One. Two. Three.", 1000)) == ["One. Two. Three."]


def test_chunk_hash_is_sha256_of_text():
    c = chunk_text("héllo wörld")[0]
    assert c.hash == text_hash("héllo wörld") == hashlib.sha256(
        "héllo wörld".encode()).hexdigest()


def test_editing_one_paragraph_leaves_other_chunks_identical():
    paras = [f"Paragraph {i} says something about topic {i}." for i in range(5)]
    old = chunk_text("\n\n".join(paras))
    paras[2] = paras[2].replace("something", "anything")
    new = chunk_text("\n\n".join(paras))
    assert [a.hash == b.hash for a, b in zip(old, new, strict=True)] == [
        True, True, False, True, True]


def _chunks(*words: str) -> list[Chunk]:
    return chunk_text("\n\n".join(words))


def test_diff_one_replaced_chunk():
    d = diff_chunks(_chunks("A.", "B.", "C.", "D."), _chunks("A.", "X.", "C.", "D."))
    assert d.kept == [(0, 0), (2, 2), (3, 3)]
    assert d.replaced == [([1], [1])]
    assert d.removed == [] and d.added == []
    assert d.new_indices == [1] and d.n_reembedded == 1


def test_diff_inserted_chunk():
    d = diff_chunks(_chunks("A.", "B.", "C."), _chunks("A.", "B.", "N.", "C."))
    assert d.kept == [(0, 0), (1, 1), (2, 3)]
    assert d.added == [2] and d.replaced == [] and d.removed == []
    assert d.n_reembedded == 1


def test_diff_removed_chunk():
    d = diff_chunks(_chunks("A.", "B.", "C."), _chunks("A.", "C."))
    assert d.kept == [(0, 0), (2, 1)]
    assert d.removed == [1] and d.added == [] and d.replaced == []
    assert d.n_reembedded == 0


def test_diff_two_chunks_replaced_by_one():
    d = diff_chunks(_chunks("A.", "B.", "C.", "D."), _chunks("A.", "X.", "D."))
    assert d.kept == [(0, 0), (3, 2)]
    assert d.replaced == [([1, 2], [1])]
    assert d.new_indices == [1]


def test_diff_identical_and_from_empty():
    same = _chunks("A.", "B.")
    d = diff_chunks(same, _chunks("A.", "B."))
    assert d.kept == [(0, 0), (1, 1)] and d.n_reembedded == 0
    d = diff_chunks([], same)
    assert d.added == [0, 1] and d.kept == []


def test_fixed_window_chunks():
    chunks = fixed_window_chunks("abcdefghij", size=4, overlap=1)
    assert texts(chunks) == ["abcd", "defg", "ghij"]
    for c in chunks:
        assert "abcdefghij"[c.start:c.end] == c.text
    with pytest.raises(ValueError):
        fixed_window_chunks("abc", size=4, overlap=4)
    with pytest.raises(ValueError):
        fixed_window_chunks("abc", size=0)


_WORD = st.text(alphabet="abcde", min_size=1, max_size=8)
_SEP = st.sampled_from([" ", " ", ". ", "! ", "\n", "\n\n", " \n \n", "\t", ".\n\n\n"])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_WORD, _SEP), max_size=40), st.integers(1, 40))
def test_chunks_cover_text_with_exact_offsets(parts, max_chars):
    text = "".join(w + s for w, s in parts)
    chunks = chunk_text(text, max_chars)
    assert_offsets(text, chunks)
    for c in chunks:
        assert 1 <= len(c.text) <= max_chars
        assert c.text == c.text.strip()
    # nothing but whitespace is dropped
    assert "".join(text.split()) == "".join("".join(c.text.split()) for c in chunks)
