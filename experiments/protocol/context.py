"""Contextual chunk headers: the document's title at the head of every chunk, for every
method alike (``protocol.chunk_context=title``).

A chunk of a long document often does not say what it is about (``Status: Final``, a clause
of one of many policies). With the header, each version's text is rewritten so that every
chunk the harness cuts from it is ``<title>\\n<chunk>``: the version is chunked with room
left for the title, and the pieces are joined by blank lines, so chunking the new text gives
exactly those headed chunks (and an edit still changes only the chunks it touches). The
title is the version's ``meta.title`` (the real corpora's derivers write it), else its
document id. Labels, runs and grades are all computed on the rewritten corpus.
"""

from __future__ import annotations

import dataclasses

from experiments.data.dataset import Dataset, DocVersion
from smartvector.chunking import chunk_text

#: the least room left for a chunk's own text beside a long title
MIN_ROOM = 200


def title_of(version: DocVersion) -> str:
    """The header a version's chunks get: ``meta.title`` (one line), else the document id."""
    title = version.meta.get("title")
    return " ".join(str(title).split()) if title else version.doc_id


def with_titles(ds: Dataset, max_chunk_chars: int) -> Dataset:
    """The dataset with every version's text rewritten so each chunk starts with its title."""
    corpus = []
    for v in ds.corpus:
        title = title_of(v)
        room = max(max_chunk_chars - len(title) - 1, MIN_ROOM)
        text = "\n\n".join(f"{title}\n{c.text}" for c in chunk_text(v.text, room))
        corpus.append(dataclasses.replace(v, text=text))
    return dataclasses.replace(ds, corpus=corpus)
