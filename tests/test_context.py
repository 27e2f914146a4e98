"""Contextual chunk headers (protocol.chunk_context=title): every chunk the harness cuts from
a rewritten version starts with its document's title, and nothing else about it changes."""

from __future__ import annotations

from datetime import UTC, datetime

from experiments.data.dataset import Dataset, DocVersion, Query
from experiments.protocol.context import title_of, with_titles
from experiments.protocol.labels import label_dataset
from smartvector.chunking import chunk_text


def _ds() -> Dataset:
    long = " ".join(f"Sentence {i} says the retention is kept." for i in range(60))
    return Dataset([
        DocVersion("a", 1, f"Intro.\n\n{long}\n\nStatus: Final", datetime(2024, 1, 1, tzinfo=UTC),
                   meta={"title": "PEP 1:  Purpose\nand Guidelines"}),
        DocVersion("b", 1, "Status: Draft", datetime(2024, 1, 1, tzinfo=UTC)),
    ], [Query("q", "status of PEP 1?", datetime(2024, 2, 1, tzinfo=UTC), ("a",), "Final")])


def test_every_chunk_starts_with_its_title() -> None:
    ds = _ds()
    titled = with_titles(ds, 300)
    assert title_of(ds.corpus[0]) == "PEP 1: Purpose and Guidelines"  # one line
    assert title_of(ds.corpus[1]) == "b"  # no meta.title: the document id
    for before, after in zip(ds.corpus, titled.corpus, strict=True):
        title = title_of(before)
        chunks = [c.text for c in chunk_text(after.text, 300)]
        assert all(c.startswith(title + "\n") and len(c) <= 300 for c in chunks)
        originals = [c.text for c in chunk_text(before.text, 300 - len(title) - 1)]
        assert [c.removeprefix(title + "\n") for c in chunks] == originals
    # the labels follow: the gold chunk now names its document
    _, labels = label_dataset(titled, 300)
    (gold,) = labels.by_query["q"].relevant
    assert labels.chunks.texts[gold] == "PEP 1: Purpose and Guidelines\nStatus: Final"
