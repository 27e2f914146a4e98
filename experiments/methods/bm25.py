"""BM25 over chunks (``bm25s``'s scoring and tokenizer), with or without the validity
filter at the query's time. A query scores the chunks created by its time (rows are
appended in time order, so those are a prefix of the ledger): time travel stays exact."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from experiments.data.dataset import DocVersion, Query
from experiments.methods.base import Context, QueryInput, RankedHit, Ranking, Retriever, register
from experiments.methods.ledger import ChunkLedger


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


class _PrefixTokens:
    """``bm25s.tokenize`` of a growing list of texts, for any prefix, each text tokenized
    once: token ids are given in order of first appearance, as ``bm25s.tokenize`` gives
    them, so the ids and vocabulary of the first ``n`` texts are exactly those it returns
    for ``texts[:n]`` (and the index built from them is the same)."""

    def __init__(self) -> None:
        self.ids: list[list[int]] = []
        self.vocab: dict[str, int] = {}
        self._vocab_at: list[int] = [0]  # vocabulary size after each text

    def extend(self, texts: list[str]) -> list[list[int]]:
        """Tokenize the texts beyond those already seen (``texts`` extends them); returns
        the new texts' token ids."""
        import bm25s

        new = texts[len(self.ids):]
        if not new:
            return []
        vocab, start = self.vocab, len(self.ids)
        for words in bm25s.tokenize(new, stopwords="en", return_ids=False,
                                    show_progress=False):
            self.ids.append([vocab.setdefault(w, len(vocab)) for w in words])
            self._vocab_at.append(len(vocab))
        return self.ids[start:]

    def vocab_size(self, n: int) -> int:
        """How many distinct tokens the first ``n`` texts hold (their ids are below it)."""
        return self._vocab_at[n]

    def prefix(self, n: int) -> Any:
        """What ``bm25s.tokenize(texts[:n])`` returns."""
        from bm25s.tokenization import Tokenized

        vocab = dict(itertools.islice(self.vocab.items(), self._vocab_at[n]))
        return Tokenized(ids=self.ids[:n], vocab=vocab)


class _Postings:
    """The rows (ascending) holding one token and its count in each, appended to as rows
    arrive; read as arrays, converted again only after it grew."""

    __slots__ = ("rows", "tfs", "_arrays")

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.tfs: list[int] = []
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None

    def add(self, row: int, tf: int) -> None:
        self.rows.append(row)
        self.tfs.append(tf)
        self._arrays = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._arrays is None:
            self._arrays = (np.asarray(self.rows, dtype=np.int64),
                            np.asarray(self.tfs, dtype=np.float32))
        return self._arrays


class BM25Index:
    """BM25 scores over the first ``n`` rows of a growing ledger, for any ``n``.

    What ``bm25s`` computes when it indexes those rows (Okapi BM25, its Lucene variant,
    float32 scores: ``idf(t) * tf / (k1 * (1 - b + b * len / avg_len) + tf)`` with
    ``idf(t) = log(1 + (n - df + 0.5) / (df + 0.5))``, summed over the query's tokens in
    their order), bit for bit (a test compares every prefix with ``bm25s``'s own index),
    but from postings kept as rows arrive: only the query's tokens are scored, over their
    rows below ``n``. ``bm25s`` has no incremental index; rebuilding it whenever the prefix
    grew cost each replay of a real corpus one full build per new prefix (68 on the
    site-policy corpus, 260 on the PEPs). ``bm25s`` still tokenizes."""

    def __init__(self, ledger: ChunkLedger, k1: float, b: float) -> None:
        self.ledger, self.k1, self.b = ledger, k1, b
        self._tokens = _PrefixTokens()  # the ledger only grows: each text tokenized once
        self._postings: list[_Postings] = []  # by token id
        self._lens = np.empty(0, dtype=np.int64)  # token count of each row
        self._avg: tuple[int, float] = (-1, 0.0)  # (n, mean length of the first n rows)

    def _extend(self) -> None:
        """Tokenize and post the ledger's rows not seen yet."""
        start = len(self._tokens.ids)
        new = self._tokens.extend(self.ledger.texts)
        if not new:
            return
        postings = self._postings
        postings.extend(_Postings() for _ in range(len(self._tokens.vocab) - len(postings)))
        for row, ids in enumerate(new, start):
            for token, tf in Counter(ids).items():
                postings[token].add(row, tf)
        self._lens = np.concatenate([self._lens, np.fromiter(
            (len(ids) for ids in new), dtype=np.int64, count=len(new))])

    def _avg_len(self, n: int) -> float:
        if self._avg[0] != n:  # (as bm25s averages: numpy's mean of the int lengths)
            self._avg = (n, self._lens[:n].mean())
        return self._avg[1]

    def scores(self, text: str, n: int) -> np.ndarray:
        """BM25 score of every one of the first ``n`` rows for ``text``."""
        import bm25s

        if n == 0:
            return np.empty(0)
        self._extend()
        vocab, known = self._tokens.vocab, self._tokens.vocab_size(n)
        q = [i for i in (vocab.get(w) for w in bm25s.tokenize(
            [text], stopwords="en", return_ids=False, show_progress=False)[0])
            if i is not None and i < known]
        if not q:
            return np.zeros(n)
        k1, b, avg = self.k1, self.b, self._avg_len(n)
        out = np.zeros(n, dtype=np.float32)
        for token in q:  # (in the query's order, repeats included, as bm25s sums them)
            rows, tfs = self._postings[token].arrays()
            m = int(np.searchsorted(rows, n))
            rows, tfs = rows[:m], tfs[:m]
            idf = np.float32(math.log(1 + (n - m + 0.5) / (m + 0.5)))
            tfc = tfs / (k1 * ((1 - b) + b * self._lens[rows] / avg) + tfs)
            out[rows] += (idf * tfc).astype(np.float32)
        return out.astype(np.float64)


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

    def state_key(self) -> tuple:
        """The same chunks and BM25 parameters: one index (the validity filter and the
        time-awareness act at search time)."""
        return ("bm25", self.ledger.max_chunk_chars, self.params.k1, self.params.b)

    def share_state(self, leader: Retriever) -> None:
        self.ledger, self.index = leader.ledger, leader.index

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
