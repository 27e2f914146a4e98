"""BM25 over chunks (the ``bm25s`` package), with or without the validity filter at the
query's time. The index covers the chunks created by the query's time (rows are appended
in time order, so it is rebuilt only when that prefix grows): time travel stays exact."""

from __future__ import annotations

import itertools
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dataset import DocVersion, Query
from .base import Context, QueryInput, RankedHit, Ranking, Retriever, register
from .ledger import ChunkLedger


@dataclass
class BM25Params:
    """Okapi BM25 (Lucene variant) with English stop words; ``validity`` keeps only chunks
    in force at the query's time (the lifecycle filter); ``time_aware: false`` sees the
    final corpus in the time-travel protocol."""

    k1: float = 1.5
    b: float = 0.75
    validity: bool = False
    time_aware: bool = False

    def __post_init__(self) -> None:
        if not self.k1 >= 0:
            raise ValueError(f"k1 must be >= 0, got {self.k1}")
        if not 0 <= self.b <= 1:
            raise ValueError(f"b must be in [0, 1], got {self.b}")


#: indexes built lately, by (k1, b, the indexed texts): the BM25 methods of one run (bm25,
#: bm25_lifecycle, hybrid_rrf) replay the same ledger, so they build the same indexes
_BUILT: OrderedDict[tuple, tuple[Any, set[str]]] = OrderedDict()
_BUILT_MAX_ROWS = 200_000  # rows over all kept indexes (bounds the memory)


def _build(texts: tuple[str, ...], k1: float, b: float,
           tokenized: Callable[[], Any] | None = None) -> tuple[Any, set[str]]:
    """A BM25 index of ``texts`` and its vocabulary (deterministic: shared when equal).
    ``tokenized``: gives ``bm25s.tokenize(texts)``'s result, called only if the index is
    built here."""
    import bm25s

    key = (k1, b, texts)
    hit = _BUILT.get(key)
    if hit is not None:
        _BUILT.move_to_end(key)
        return hit
    if tokenized is None:
        tokens = bm25s.tokenize(list(texts), stopwords="en", show_progress=False)
    else:
        tokens = tokenized()
    bm25 = bm25s.BM25(k1=k1, b=b)
    bm25.index(tokens, show_progress=False)
    built = (bm25, set(tokens.vocab))
    _BUILT[key] = built
    rows = sum(len(k[2]) for k in _BUILT)
    while rows > _BUILT_MAX_ROWS and len(_BUILT) > 1:
        rows -= len(_BUILT.popitem(last=False)[0][2])
    return built


class _PrefixTokens:
    """``bm25s.tokenize`` of a growing list of texts, for any prefix, each text tokenized
    once: token ids are given in order of first appearance, as ``bm25s.tokenize`` gives
    them, so the ids and vocabulary of the first ``n`` texts are exactly those it returns
    for ``texts[:n]`` (and the index built from them is the same)."""

    def __init__(self) -> None:
        self.ids: list[list[int]] = []
        self.vocab: dict[str, int] = {}
        self._vocab_at: list[int] = [0]  # vocabulary size after each text

    def extend(self, texts: list[str]) -> None:
        """Tokenize the texts beyond those already seen (``texts`` extends them)."""
        import bm25s

        new = texts[len(self.ids):]
        if not new:
            return
        vocab = self.vocab
        for words in bm25s.tokenize(new, stopwords="en", return_ids=False,
                                    show_progress=False):
            self.ids.append([vocab.setdefault(w, len(vocab)) for w in words])
            self._vocab_at.append(len(vocab))

    def prefix(self, n: int) -> Any:
        """What ``bm25s.tokenize(texts[:n])`` returns."""
        from bm25s.tokenization import Tokenized

        vocab = dict(itertools.islice(self.vocab.items(), self._vocab_at[n]))
        return Tokenized(ids=self.ids[:n], vocab=vocab)


class BM25Index:
    """A BM25 index over the first ``n`` rows of a ledger, rebuilt when ``n`` changes."""

    def __init__(self, ledger: ChunkLedger, k1: float, b: float) -> None:
        self.ledger, self.k1, self.b = ledger, k1, b
        self._n = -1
        self._bm25 = None
        self._vocab: set[str] = set()
        self._tokens = _PrefixTokens()  # the ledger only grows: each text tokenized once

    def _tokenized(self, n: int) -> Any:
        """``bm25s.tokenize`` of the ledger's first ``n`` texts."""
        self._tokens.extend(self.ledger.texts)
        return self._tokens.prefix(n)

    def scores(self, text: str, n: int) -> np.ndarray:
        """BM25 score of every one of the first ``n`` rows for ``text``."""
        import bm25s

        log = logging.getLogger("bm25s")  # it logs every index build
        if log.level != logging.WARNING:  # (setLevel clears every logger's cache: ~10 us)
            log.setLevel(logging.WARNING)
        if n == 0:
            return np.empty(0)
        if n != self._n:
            self._bm25, self._vocab = _build(tuple(self.ledger.texts[:n]), self.k1, self.b,
                                             lambda: self._tokenized(n))
            self._n = n
        q = [w for w in bm25s.tokenize([text], stopwords="en", return_ids=False,
                                       show_progress=False)[0] if w in self._vocab]
        if not q:
            return np.zeros(n)
        return np.asarray(self._bm25.get_scores(q), dtype=np.float64)


def margin_probability(scores: np.ndarray) -> float:
    """A raw probability for a score with no scale: the top score's share of the top two
    (1.0 when it is the only positive score, NaN when there is none)."""
    s = np.sort(scores[scores > 0])[::-1]
    if len(s) == 0:
        return float("nan")
    return 1.0 if len(s) == 1 else float(s[0] / (s[0] + s[1]))


@register("bm25")
class BM25Retriever(Retriever):
    """Lexical retrieval: BM25 over every chunk ingested, or over the chunks in force."""

    Params = BM25Params

    def __init__(self, name: str, params: BM25Params, ctx: Context) -> None:
        super().__init__(name, params, ctx)
        self.time_aware = params.time_aware
        self.ledger = ChunkLedger(ctx.store_config.max_chunk_chars)
        self.index = BM25Index(self.ledger, params.k1, params.b)

    def ingest(self, version: DocVersion) -> int:
        return len(self.ledger.add(version)[0])

    @property
    def size(self) -> int:
        return len(self.ledger)

    def search(self, query: QueryInput, at: float, k: int, gold: Query | None = None
               ) -> Ranking:
        mask = self.ledger.visible(at, self.params.validity)
        scores = self.index.scores(query.text, len(mask))
        rows = np.flatnonzero(mask & (scores > 0))
        if len(rows) == 0:
            return Ranking([], float("nan"))
        order = rows[np.lexsort((rows, -scores[rows]))][:k]
        led = self.ledger
        hits = [RankedHit(led.ids[r], led.doc_of[r], led.texts[r], float(scores[r]))
                for r in order.tolist()]
        return Ranking(hits, margin_probability(scores[rows]))
