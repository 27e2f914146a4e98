"""Chunking with source offsets, and chunk-level diffs for surgical updates.

A document is split into paragraphs (runs of text separated by blank lines); a paragraph
longer than ``max_chars`` is split at sentence ends. Boundaries depend only on the text
around them, so an edit inside one paragraph leaves every other chunk byte-identical: that
is what lets an update re-embed only the chunk it touches.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

#: what a paragraph is (the specification; :func:`paragraph_spans` finds the same spans faster)
_PARAGRAPH = re.compile(r"\S(?:.*?\S)?(?=\s*\n\s*\n|\s*$)", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def text_hash(text: str) -> str:
    """SHA-256 hex digest of a text (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Chunk:
    """A span ``text == document[start:end]`` of a document."""

    index: int
    start: int
    end: int
    text: str

    @property
    def hash(self) -> str:
        return text_hash(self.text)


def _split_long(text: str, offset: int, max_chars: int) -> list[tuple[int, int]]:
    """Split one paragraph at sentence ends (or, failing that, spaces) into <= max_chars."""
    if len(text) <= max_chars:
        return [(offset, offset + len(text))]
    cuts = [m.end() for m in _SENTENCE_END.finditer(text)]
    spans: list[tuple[int, int]] = []
    start = 0
    while len(text) - start > max_chars:
        candidates = [c for c in cuts if start < c <= start + max_chars]
        if not candidates:
            space = text.rfind(" ", start + 1, start + max_chars)
            cut = space + 1 if space > start else start + max_chars
        else:
            cut = candidates[-1]
        piece = text[start:cut].rstrip()
        spans.append((offset + start, offset + start + len(piece)))
        start = cut
        while start < len(text) and text[start].isspace():
            start += 1
    if start < len(text):
        spans.append((offset + start, offset + len(text)))
    return spans


def paragraph_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the matches of ``_PARAGRAPH`` in ``text``, found without the regex.

    A paragraph ends at a whitespace run holding two line breaks, or at the end of the text,
    and is stripped of surrounding whitespace; as with the regex (whose optional group is
    greedy), a one-character paragraph runs on to the end of the next paragraph. The regex
    steps through every character with a lookahead; this jumps from line break to line break
    (~20x faster on long documents, which every surgical update re-chunks).
    """
    n = len(text)
    found: list[tuple[int, int]] = []

    def emit(a: int, b: int) -> None:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            found.append((a, b))

    pos = 0  # start of the current paragraph's segment
    i = text.find("\n")
    while i != -1:
        j = text.find("\n", i + 1)
        if j == -1:
            break
        if j == i + 1 or text[i + 1:j].isspace():  # a blank line: a boundary run
            s = i
            while s > pos and text[s - 1].isspace():
                s -= 1
            e = j + 1
            while e < n and text[e].isspace():
                e += 1
            emit(pos, s)
            pos = e
            i = text.find("\n", e)
        else:
            i = j
    emit(pos, n)
    out: list[tuple[int, int]] = []
    k = 0
    while k < len(found):
        if found[k][1] - found[k][0] == 1 and k + 1 < len(found):
            out.append((found[k][0], found[k + 1][1]))
            k += 2
        else:
            out.append(found[k])
            k += 1
    return out


def chunk_text(text: str, max_chars: int = 1000) -> list[Chunk]:
    """Split ``text`` into paragraph chunks that keep their offsets into ``text``."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    spans: list[tuple[int, int]] = []
    for start, end in paragraph_spans(text):
        spans.extend(_split_long(text[start:end], start, max_chars))
    return [Chunk(i, s, e, text[s:e]) for i, (s, e) in enumerate(spans)]


def fixed_window_chunks(text: str, size: int = 200, overlap: int = 0) -> list[Chunk]:
    """Fixed-size character windows (the common splitter of RAG pipelines), for baselines."""
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"need size >= 1 and 0 <= overlap < size, got {size}, {overlap}")
    step = size - overlap
    out = []
    for i, s in enumerate(range(0, max(len(text) - overlap, 1), step)):
        e = min(s + size, len(text))
        out.append(Chunk(i, s, e, text[s:e]))
    return out


@dataclass
class ChunkDiff:
    """How the chunks of a new document version relate to the old one's.

    ``kept`` pairs (old index, new index) of identical chunks; ``replaced`` pairs a run of old
    chunks with the run of new chunks that took its place; ``removed`` and ``added`` are
    runs with no counterpart.
    """

    kept: list[tuple[int, int]] = field(default_factory=list)
    replaced: list[tuple[list[int], list[int]]] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    added: list[int] = field(default_factory=list)

    @property
    def new_indices(self) -> list[int]:
        """New chunks that need an embedding (in document order)."""
        out = [j for _, news in self.replaced for j in news] + list(self.added)
        return sorted(out)

    @property
    def n_reembedded(self) -> int:
        return len(self.new_indices)


def diff_chunks(old: Sequence[Chunk], new: Sequence[Chunk]) -> ChunkDiff:
    """Align two chunk lists by content hash (difflib, no junk heuristic)."""
    matcher = difflib.SequenceMatcher(
        None, [c.hash for c in old], [c.hash for c in new], autojunk=False
    )
    diff = ChunkDiff()
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            diff.kept.extend(zip(range(i1, i2), range(j1, j2), strict=True))
        elif tag == "replace":
            diff.replaced.append((list(range(i1, i2)), list(range(j1, j2))))
        elif tag == "delete":
            diff.removed.extend(range(i1, i2))
        else:
            diff.added.extend(range(j1, j2))
    return diff
