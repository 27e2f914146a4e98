"""The consolidation agent ("sleep"): dormancy, contradictions, dependency edges, ripples,
archival and promotion, in one pass at a reference time.

Contradictions are searched among each new vector's nearest neighbours in the index (never
all pairs): two live vectors of different documents contradict when their embeddings are
close (same topic) and the quantities they state are disjoint (different claim). The pair is
resolved by a majority of three votes, as in the paper: recency, source authority and
feedback balance (a tie in one criterion abstains; a tied vote goes to authority, then
recency). The loser takes ``contradiction_penalty`` and sends a ripple; both get a
``contradicts`` edge. The reference proof-of-concept only logs the preferred side; acting on
it is this library's reading of "resolve".

The neighbour search of the new vectors is one batched index search, made in an order that
keeps similar queries together (faster, same results); on an HNSW index a large pass searches
only the new vectors whose texts state quantities (the others can contradict nothing: same
results, ~40% fewer queries on the scale benchmark). ``ConsolidationParams.search_ef``, when
set, bounds it: the index's ``ef_search`` for this search only (lower: faster, and it may miss
some neighbours, hence some contradictions); None (the default) keeps the index's own. The
candidate pairs it yields are tested in bulk, and the contradictions found are linked,
penalised and reported in bulk, exactly as one pair after another in row order would be.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from .timeutil import DAY
from .vector import ConsolidationReport, Event

_ORDER_MIN = 4096  # fewer new vectors are searched in row order (ordering would not pay)
_SEARCH_BLOCK = 32768  # queries per index search (and rows per pivot product)
_PIVOTS = 128  # pivots per level of the search's locality order
_CLAIMS_FIRST = 4096  # from this many new vectors up, an HNSW pass searches only those stating
# quantities (the claims of the new vectors are scanned before the search, not after)


class Consolidatable(Protocol):
    """What a consolidation pass reads and changes: the store's public state and methods
    (this module never imports the store)."""

    columns: Any
    config: Any
    engine: Any
    graph: Any
    index: Any
    ids: list[str]
    texts: list[str]
    doc_of: list[str]
    docs: dict[str, Any]
    events: dict[int, list[Event]]
    pending_ripple: list[int]
    last_consolidated: float

    def __len__(self) -> int: ...
    def confidence_at(self, rows: np.ndarray, at: float) -> np.ndarray: ...
    def log(self, row: int, at: float, kind: str, delta: float = 0.0,
            detail: str = "") -> None: ...
    def penalise(self, row: int, amount: float, at: float, kind: str, detail: str) -> None: ...
    def penalise_many(self, rows: np.ndarray, amounts: Any, at: float, kind: str,
                      details: Sequence[str]) -> None: ...
    def propagate(self, row: int, at: float) -> int: ...
    def propagate_many(self, rows: Any, at: float) -> int: ...
    def refresh_edge_counts(self, rows: Any, t: float) -> None: ...

#: a number (optionally "$"-prefixed, not preceded by a word character or ".") and its unit:
#: ``(?<![\w.])(\$?\d+(?:[.,]\d+)*)\s*(%|[a-z]+)?``, spelt so that it starts with a character
#: class (the engine then skips to the next "$" or digit instead of trying every position)
_QUANTITY = re.compile(r"([$\d](?<=(?<![\w.])[$\d])(?<=[^$]|\$(?=\d))\d*(?:[.,]\d+)*)\s*"
                       r"(%|[a-z]+)?", re.IGNORECASE)


def _normalised(found: list[tuple[str, str]]) -> frozenset[str]:
    """The claims of ``_QUANTITY.findall``'s matches (see :func:`claims`)."""
    out = set()
    for num, unit in found:
        num = num.replace(",", "")
        unit = (unit or "").lower()
        if len(unit) > 3 and unit.endswith("s"):
            unit = unit[:-1]
        out.add(f"{num} {unit}".strip())
    return frozenset(out)


@lru_cache(maxsize=65536)
def claims(text: str) -> frozenset[str]:
    """The quantities a text states, normalised: ``"90 days"`` -> ``"90 day"``."""
    return _normalised(_QUANTITY.findall(text))


def _ascii_table(pattern: str) -> np.ndarray:
    """Which bytes (of 256) are ASCII characters that ``pattern`` matches, as the quantity
    pattern's engine sees them (IGNORECASE, unicode classes)."""
    rx = re.compile(pattern, re.IGNORECASE)
    return np.array([i < 128 and rx.fullmatch(chr(i)) is not None for i in range(256)])


#: per byte: 1 where a quantity can start ("$" or an ASCII digit) or NUL (separates texts)
_MARKS = (_ascii_table(r"[$\d]") | (np.arange(256) == 0)).astype(np.uint8).tobytes()
_NUMBER = _ascii_table(r"[\d.,]")  # what may follow in its number
_SPACE = _ascii_table(r"\s")
_LETTER = _ascii_table(r"[a-z]")  # its unit (or one "%")
_CLAIMS_BLOCK = 1 << 16  # texts per scan of :func:`claims_many`
_WINDOW = 16  # windows of claims up to this long are grouped by numpy (a multiple of 8)


def _run_end(buf: np.ndarray, at: np.ndarray, table: np.ndarray) -> np.ndarray:
    """For each start in ``at``, the end of the run of ``buf`` bytes in ``table`` from it."""
    at = at.copy()
    moving = np.flatnonzero(table[buf[at]])
    while len(moving):
        at[moving] += 1
        moving = moving[table[buf[at[moving]]]]
    return at


def claims_many(texts: Sequence[str]) -> list[frozenset[str]]:
    """``[claims(t) for t in texts]``, faster on many texts (and without the cache)."""
    index, found = _claims_indexed(texts)
    return [found[i] for i in index.tolist()]


def _claims_indexed(texts: Sequence[str]) -> tuple[np.ndarray, list[frozenset[str]]]:
    """The claims of every text as an index into a list of claim sets (0: none), and the
    list: ``claims(texts[i]) == found[index[i]]``.

    The pattern is slow to scan (~7 ns a character, and most of a text states nothing), so
    ASCII texts are scanned by numpy instead, joined, for where a quantity can start (a "$"
    or a digit). The matches of a text lie between its first such place and the furthest a
    match from its last one could reach (its number, spaces, then letters or one "%"), and
    depend only on that window and the character before it (the pattern looks one back):
    the pattern runs once per distinct window (a text without one states nothing). Other
    texts take the pattern whole."""
    index = np.zeros(len(texts), np.int64)
    found: list[frozenset[str]] = [frozenset()]
    findall = _QUANTITY.findall
    known: dict[bytes, int] = {}
    for s in range(0, len(texts), _CLAIMS_BLOCK):
        block = list(texts[s:s + _CLAIMS_BLOCK])
        where = np.arange(s, s + len(block))
        joined = "\0".join(block)
        if not joined.isascii():
            plain = np.array([not text.isascii() for text in block])
            for i in where[plain].tolist():
                index[i] = len(found)
                found.append(_normalised(findall(texts[i])))
            where = where[~plain]
            block = [texts[i] for i in where.tolist()]
            joined = "\0".join(block)
        if not block:
            continue
        # NUL before, between and after the texts: no run crosses it, and as the character
        # before a text's start it reads as none (neither a word character nor ".")
        raw = b"\0" + joined.encode("ascii") + b"\0"
        buf = np.frombuffer(raw, np.uint8)
        at = np.flatnonzero(np.frombuffer(raw.translate(_MARKS), bool))
        sep = buf[at] == 0
        if np.count_nonzero(sep) == len(block) + 1:  # the NULs are the separators
            cand, which = at[~sep], (np.cumsum(sep) - 1)[~sep]
        else:  # a text holds NUL: the texts' starts from their lengths
            cand = at[~sep]
            lens = np.fromiter(map(len, block), np.int64, len(block))
            which = np.searchsorted(np.cumsum(lens + 1) - lens, cand, side="right") - 1
        if not len(cand):
            continue
        change = np.flatnonzero(which[1:] != which[:-1])
        first, last = np.r_[0, change + 1], np.r_[change, len(cand) - 1]
        end = _run_end(buf, _run_end(buf, cand[last] + 1, _NUMBER), _SPACE)
        end = np.where(buf[end] == ord("%"), end + 1, _run_end(buf, end, _LETTER))
        index[where[which[first]]] = _windows(raw, buf, cand[first] - 1, end, known, found)
    return index, found


def _windows(raw: bytes, buf: np.ndarray, lo: np.ndarray, hi: np.ndarray,
             known: dict[bytes, int], found: list[frozenset[str]]) -> np.ndarray:
    """The index in ``found`` of the claims of each window ``raw[lo[i]:hi[i]]`` (its first
    character only read by the pattern's look-behind), ``known`` mapping the windows seen
    so far to theirs (both extended with new ones). Windows of up to ``_WINDOW`` bytes are
    grouped by numpy (they repeat: "every 30 days"), so that Python sees each once."""
    def claims_at(key: bytes) -> int:
        i = known.get(key)
        if i is None:
            i = known[key] = len(found)
            found.append(_normalised(_QUANTITY.findall(key.decode("ascii"), 1)))
        return i

    out = np.empty(len(lo), np.int64)
    size = hi - lo
    short = np.flatnonzero(size <= _WINDOW)
    if len(short):
        cols = np.arange(_WINDOW)
        win = np.where(cols < size[short, None],
                       buf[np.minimum(lo[short, None] + cols, len(buf) - 1)], 0)
        key = np.ascontiguousarray(win, dtype=np.uint8).view(np.uint64)
        order = np.lexsort([size[short]] + [key[:, c] for c in range(key.shape[1])])
        key, length = key[order], size[short][order]
        head = np.r_[True, (key[1:] != key[:-1]).any(axis=1) | (length[1:] != length[:-1])]
        one = short[order[head]]  # a window of each group
        ids = [claims_at(raw[a:b]) for a, b in zip(lo[one].tolist(), hi[one].tolist(),
                                                    strict=True)]
        out[short[order]] = np.array(ids, np.int64)[np.cumsum(head) - 1]
    for j in np.flatnonzero(size > _WINDOW).tolist():
        out[j] = claims_at(raw[lo[j]:hi[j]])
    return out


def differ_in_claims(a: str, b: str) -> bool:
    """Both texts state quantities and none of them agree."""
    ca, cb = claims(a), claims(b)
    return bool(ca) and bool(cb) and not (ca & cb)


def resolve(store: Consolidatable, a: int, b: int) -> tuple[int, int, str]:
    """The winner of a contradiction; returns (winner, loser, reasons).

    ``resolution="majority"`` (the paper): a majority of recency, authority and feedback
    (a tie in one criterion abstains; a tied vote goes to authority, then recency).
    ``resolution="authority_margin"``: the source whose authority is higher by at least
    ``authority_margin`` wins (a policy beats a chat message), otherwise the newer one (a
    revision beats the text it revises, whatever channel it came through)."""
    c = store.columns
    params = store.config.consolidation
    if params.resolution == "authority_margin":
        da = float(c["authority"][a] - c["authority"][b])
        if abs(da) >= params.authority_margin and da != 0:
            winner = a if da > 0 else b
            why = f"authority:{store.ids[winner]}"
        elif c["created_at"][a] != c["created_at"][b]:
            winner = a if c["created_at"][a] > c["created_at"][b] else b
            why = f"recency:{store.ids[winner]}"
        else:
            winner, why = min(a, b), "tie"
        return winner, (b if winner == a else a), why
    votes = {a: 0, b: 0}
    reasons = []
    for name, va, vb in (
        ("recency", c["created_at"][a], c["created_at"][b]),
        ("authority", c["authority"][a], c["authority"][b]),
        ("feedback", c["positive"][a] - c["negative"][a], c["positive"][b] - c["negative"][b]),
    ):
        if va != vb:
            w = a if va > vb else b
            votes[w] += 1
            reasons.append(f"{name}:{store.ids[w]}")
    if votes[a] != votes[b]:
        winner = a if votes[a] > votes[b] else b
    elif c["authority"][a] != c["authority"][b]:
        winner = a if c["authority"][a] > c["authority"][b] else b
    elif c["created_at"][a] != c["created_at"][b]:
        winner = a if c["created_at"][a] > c["created_at"][b] else b
    else:
        winner = min(a, b)
    loser = b if winner == a else a
    return winner, loser, ", ".join(reasons) or "tie"


def _resolve_many(store: Consolidatable, a: np.ndarray, b: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """:func:`resolve` of every pair ``(a[i], b[i])`` at once: (winners, losers, reasons)."""
    c = store.columns
    params = store.config.consolidation
    ids = store.ids
    ca, cb = c["created_at"][a], c["created_at"][b]
    aa, ab = c["authority"][a], c["authority"][b]
    if params.resolution == "authority_margin":
        da = aa - ab
        by_authority = (np.abs(da) >= params.authority_margin) & (da != 0)
        by_recency = ~by_authority & (ca != cb)
        a_wins = np.where(by_authority, da > 0, np.where(by_recency, ca > cb, a < b))
        winner = np.where(a_wins, a, b)
        why = [f"authority:{ids[w]}" if au else f"recency:{ids[w]}" if rec else "tie"
               for w, au, rec in zip(winner.tolist(), by_authority.tolist(),
                                     by_recency.tolist(), strict=True)]
        return winner, np.where(a_wins, b, a), why
    votes = np.zeros(len(a), np.int64)  # votes for a minus votes for b
    reasons = []  # per criterion: its name and the row it votes for (-1: tie, abstains)
    voters = np.zeros(len(a), np.int64)  # which criteria voted (bits 4, 2, 1, in order)
    for bit, name, va, vb in (
        (4, "recency", ca, cb),
        (2, "authority", aa, ab),
        (1, "feedback", c["positive"][a] - c["negative"][a],
         c["positive"][b] - c["negative"][b]),
    ):
        voted = va != vb
        for_a = voted & (va > vb)
        votes += for_a.astype(np.int64) - (voted & ~for_a)
        voters += bit * voted
        reasons.append((bit, name, np.where(for_a, a, b)))
    a_wins = np.where(votes != 0, votes > 0,
                      np.where(aa != ab, aa > ab, np.where(ca != cb, ca > cb, a < b)))
    # "name:id" of each criterion that voted, joined by ", " ("tie" if none), built one
    # string per pair for each combination of voters
    why = np.full(len(a), "tie", dtype=object)
    for combo in range(1, 8):
        at = np.flatnonzero(voters == combo)
        if not len(at):
            continue
        used = [(name, w[at].tolist()) for bit, name, w in reasons if combo & bit]
        if len(used) == 1:
            (n0, w0), = used
            why[at] = [f"{n0}:{ids[x]}" for x in w0]
        elif len(used) == 2:
            (n0, w0), (n1, w1) = used
            why[at] = [f"{n0}:{ids[x]}, {n1}:{ids[y]}" for x, y in zip(w0, w1, strict=True)]
        else:
            (n0, w0), (n1, w1), (n2, w2) = used
            why[at] = [f"{n0}:{ids[x]}, {n1}:{ids[y]}, {n2}:{ids[z]}"
                       for x, y, z in zip(w0, w1, w2, strict=True)]
    return np.where(a_wins, a, b), np.where(a_wins, b, a), why.tolist()


def _spaced(n: int, m: int) -> np.ndarray:
    """``min(n, m)`` evenly spaced indices into ``range(n)``."""
    return np.unique(np.linspace(0, n - 1, min(n, m)).astype(np.int64))


def _nearest(vectors: np.ndarray, rows: np.ndarray, pivots: np.ndarray) -> np.ndarray:
    """For each of ``rows`` (of ``vectors``), the index of its most similar of ``pivots``."""
    p = vectors[pivots].T
    if len(rows) and rows[-1] - rows[0] == len(rows) - 1 and np.all(np.diff(rows) == 1):
        x = vectors[rows[0]:rows[-1] + 1]  # consecutive rows (all of them, often): no copy
        return np.concatenate([np.argmax(x[s:s + _SEARCH_BLOCK] @ p, axis=1)
                               for s in range(0, len(rows), _SEARCH_BLOCK)])
    return np.concatenate([np.argmax(vectors[rows[s:s + _SEARCH_BLOCK]] @ p, axis=1)
                           for s in range(0, len(rows), _SEARCH_BLOCK)])


def _locality_order(vectors: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """A permutation of ``range(len(rows))`` that puts similar vectors next to each other:
    grouped by the most similar of ``_PIVOTS`` evenly spaced pivots, each group by the most
    similar of ``_PIVOTS`` of its own evenly spaced members. Index searches made in this order
    walk mostly the same part of the graph one after another, which then stays in the CPU
    caches; no search's result changes."""
    top = _nearest(vectors, rows, rows[_spaced(len(rows), _PIVOTS)])
    sub = np.empty(len(rows), np.int64)
    by_top = np.argsort(top, kind="stable")
    for group in np.split(by_top, np.flatnonzero(np.diff(top[by_top])) + 1):
        sub[group] = _nearest(vectors, rows[group], rows[group[_spaced(len(group), _PIVOTS)]])
    return np.lexsort((sub, top))


def _search(index: Any, vectors: np.ndarray, rows: np.ndarray, k: int, ef: int | None
            ) -> tuple[np.ndarray, np.ndarray]:
    """``index.search(vectors[rows], k)``, row for row the same (see
    :func:`_search_in_order`)."""
    labels, sims, order = _search_in_order(index, vectors, rows, k, ef)
    out_labels, out_sims = np.empty_like(labels), np.empty_like(sims)
    out_labels[order], out_sims[order] = labels, sims
    return out_labels, out_sims


def _search_in_order(index: Any, vectors: np.ndarray, rows: np.ndarray, k: int,
                     ef: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``index.search(vectors[rows[order]], k)`` and ``order``: the search's results in the
    order it was made, row ``i`` that of ``rows[order[i]]``.

    An HNSW index (one with an ``ef_search``) answers each query on its own, so from
    ``_ORDER_MIN`` queries up it is searched in blocks of ``_SEARCH_BLOCK`` queries in
    :func:`_locality_order`; other indexes are searched in one batch in row order (the exact
    index's matrix products may round differently in batches of another shape). ``ef``
    (when not None) replaces an HNSW index's ``ef_search`` during the search: a lower one is
    faster and may miss neighbours."""
    saved = getattr(index, "ef_search", None)
    if saved is None or not len(rows):
        return (*index.search(vectors[rows], k), np.arange(len(rows)))
    order = (_locality_order(vectors, rows) if len(rows) >= _ORDER_MIN
             else np.arange(len(rows)))
    if ef is not None:
        index.ef_search = ef
    try:
        found = [index.search(vectors[rows[order[s:s + _SEARCH_BLOCK]]], k)
                 for s in range(0, len(rows), _SEARCH_BLOCK)]
    finally:
        index.ef_search = saved
    if len(found) == 1:
        return (*found[0], order)
    return (np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found]),
            order)


def _rows_in(n: int, *rows: np.ndarray) -> np.ndarray:
    """The distinct rows (of ``range(n)``) in any of ``rows``, sorted: ``np.unique`` of
    their concatenation, without its sort."""
    mark = np.zeros(n, bool)
    for r in rows:
        mark[r] = True
    return np.flatnonzero(mark)


def _other_document(doc_of: list[str], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether rows ``a[i]`` and ``b[i]`` belong to different documents (only the pairs'
    rows are read: a pass has few candidate pairs and the store many rows)."""
    get = doc_of.__getitem__
    return np.fromiter(map(operator.ne, map(get, a.tolist()), map(get, b.tolist())), bool,
                       len(a))


def _at_least(x: np.ndarray, threshold: float) -> np.ndarray:
    """``x.astype(np.float64) >= threshold``, without the float64 copy of float32 ``x``:
    compared with the least float32 at or above ``threshold`` instead."""
    if x.dtype != np.float32:
        return x.astype(np.float64) >= threshold
    t32 = np.float32(threshold)
    if float(t32) < threshold:
        t32 = np.nextafter(t32, np.float32(np.inf))
    return x >= t32


def _contradictions(store: Consolidatable, t: float, new_live: np.ndarray, vectors: np.ndarray,
                    rows: np.ndarray, live: np.ndarray, report: ConsolidationReport
                    ) -> list[int]:
    """Step 2 of :func:`consolidate`: find and resolve the contradictions between the new
    vectors ``new_live`` (``vectors[rows]``) and their index neighbours; returns the losers,
    in the order they lost.

    Every test but the last is vectorised over all candidate pairs (each new vector's first
    ``neighbours`` live neighbours, itself excluded, similar enough, in row order then
    similarity order): another document, both texts state quantities and none agree, the
    pair not linked before nor met earlier in this pass; the texts' claims come from one bulk
    scan (:func:`_claims_indexed`) and are compared as integer codes where each side states
    one quantity. The pairs left are resolved, linked, penalised and reported at once (the
    same edges, events and details as one pair after another, in that order). On an HNSW
    index, from ``_CLAIMS_FIRST`` new vectors up, their claims are scanned first and only
    those stating a quantity are searched."""
    params = store.config.consolidation
    c = store.columns
    texts = store.texts
    claims_of, stated, scanned = None, [frozenset()], None
    if len(new_live) >= _CLAIMS_FIRST and getattr(store.index, "ef_search", None) is not None:
        # a contradiction needs both texts to state quantities: a new vector whose text
        # states none has none, and is not searched. An HNSW index answers each query on its
        # own, so the others' neighbours do not change (the exact index's batched products
        # might round differently in batches of another shape: it searches them all).
        index, stated = _claims_indexed(list(map(texts.__getitem__, new_live.tolist())))
        claims_of = np.zeros(len(store), np.int64)  # row -> its claims in stated (0: none)
        claims_of[new_live] = index
        scanned = np.zeros(len(store), bool)
        scanned[new_live] = True
        states = np.array(list(map(bool, stated)))[index]
        new_live, rows = new_live[states], rows[states]
        if not len(new_live):
            return []
    k = min(2 * params.neighbours + 1, len(store.index))
    labels, sims, order = _search_in_order(store.index, vectors, rows, k, params.search_ef)
    # the candidates are found in the search's order (row i: new_live[order[i]]'s results),
    # then sorted into row order (the filters before that are of each pair on its own)
    query = new_live[order]
    # over-fetched so that deprecated or future neighbours do not crowd out live ones
    ok = live[labels] & (labels != query[:, None])
    # (a count of at most k: small integers, much faster to sum along rows than int64)
    ok &= np.cumsum(ok, axis=1, dtype=np.int16 if k < 2**15 else np.int64) <= min(
        params.neighbours, k)
    ok &= _at_least(sims, params.contradiction_similarity)
    at = np.flatnonzero(ok)  # the candidates, as positions in labels (row, rank)
    if not len(at):  # (the common case of a small pass: nothing below costs anything then)
        return []
    a, b = query[at // labels.shape[1]], labels.reshape(-1)[at]
    # claims of every row involved, coded: -1 none, -2 several, else the id of its one claim
    seen = _rows_in(len(store), a, b)
    if claims_of is None:
        claims_of = np.zeros(len(store), np.int64)
    else:  # (the new rows' claims are known: the others' are appended to stated)
        seen = seen[~scanned[seen]]
    if len(seen):
        index, more = _claims_indexed(list(map(texts.__getitem__, seen.tolist())))
        claims_of[seen] = np.where(index > 0, index + (len(stated) - 1), 0)
        stated = [*stated, *more[1:]]
    ids: dict[str, int] = {}
    code_of = np.array([-1 if not q else -2 if len(q) > 1 else ids.setdefault(next(iter(q)),
                                                                              len(ids))
                        for q in stated], dtype=np.int64)
    code = code_of[claims_of]
    qa, qb = code[a], code[b]
    other = _other_document(store.doc_of, a, b)
    differ = other & (qa >= 0) & (qb >= 0) & (qa != qb)
    several = np.flatnonzero(other & (((qa == -2) & (qb != -1)) | ((qb == -2) & (qa != -1))))
    differ[several] = [stated[i].isdisjoint(stated[j]) for i, j in zip(
        claims_of[a[several]].tolist(), claims_of[b[several]].tolist(), strict=True)]
    at = at[differ]
    if not len(at):
        return []
    # row order, then the search's (similarity) order within a row
    at = at[np.argsort(order[at // labels.shape[1]], kind="stable")]
    a, b, s = query[at // labels.shape[1]], labels.reshape(-1)[at], sims.reshape(-1)[at]
    fresh = np.flatnonzero(~store.graph.has_many("contradicts", a, b))
    # a pair met twice (each is a neighbour of the other) is resolved at its first meeting
    pair = np.minimum(a[fresh], b[fresh]) * len(store) + np.maximum(a[fresh], b[fresh])
    first = np.sort(fresh[np.unique(pair, return_index=True)[1]])
    a, b, s = a[first], b[first], s[first]
    winner, loser, why = _resolve_many(store, a, b)
    np.minimum.at(c["lost_at"], loser, t)
    # each pair is new (not linked a -> b, and met once): linked, penalised and reported in
    # bulk, as one by one in this order
    store.graph.link_contradicts_many(a, b, t)
    ids_of = store.ids
    kept = list(map(ids_of.__getitem__, winner.tolist()))
    store.penalise_many(loser, params.contradiction_penalty, t, "contradiction",
                        [f"lost to {w} ({reason})" for w, reason in zip(kept, why, strict=True)])
    report.details.extend([
        f"contradiction {ids_of[x]} ~ {ids_of[y]} (cos {sim:.2f}): kept {w} ({reason})"
        for x, y, sim, w, reason in zip(a.tolist(), b.tolist(), s.tolist(), kept, why,
                                        strict=True)])
    report.contradictions += len(a)
    return loser.tolist()


def _log_all(store: Consolidatable, rows: np.ndarray, t: float, kind: str,
             details: list[str] | None = None) -> None:
    """``store.log(r, t, kind, detail=details[i])`` for every row ``r = rows[i]`` (no detail
    if ``details`` is None), rows with the same detail sharing one (immutable) event object.
    Only for kinds that change no count (the store's log does nothing more for them)."""
    events = store.events
    get = events.get
    if details is None:
        ev = Event(t, kind)
        for r in rows.tolist():
            evs = get(r)
            if evs is None:
                events[r] = [ev]
            else:
                evs.append(ev)
        return
    shared: dict[str, Event] = {}
    for r, d in zip(rows.tolist(), details, strict=True):
        ev = shared.get(d)
        if ev is None:
            ev = shared[d] = Event(t, kind, 0.0, d)
        evs = get(r)
        if evs is None:
            events[r] = [ev]
        else:
            evs.append(ev)


def consolidate(store: Consolidatable, t: float) -> ConsolidationReport:
    """One consolidation pass at time ``t`` (see the module docstring).

    Vectorised over rows where the outcome does not depend on order (masks, column updates,
    the batched index search, the tests of contradiction candidates and their resolution),
    and in bulk where it does (edges, penalties and their count log, written as one call
    after another would); Python loops remain over the contradictions' strings (details,
    events), the dependency rows, the ripples' breadth-first searches, and event logging.
    """
    report = ConsolidationReport(at=t)
    n = len(store)
    if n == 0:
        return report
    c = store.columns
    params = store.config.consolidation
    exists = c["created_at"] <= t
    live = exists & ~(c["superseded_at"] <= t)
    report.checked = int(live.sum())

    # 1. decay: active vectors whose live confidence fell below the threshold go dormant
    active = np.flatnonzero(live & (c["consolidated_at"] <= t) & ~(c["dormant_at"] <= t))
    if len(active):
        conf = store.confidence_at(active, t)
        low = store.engine.is_dormant(conf)
        c["dormant_at"][active[low]] = t
        _log_all(store, active[low], t, "dormant",
                 [f"confidence {cf:.3f} below threshold" for cf in conf[low].tolist()])
        report.dormant += int(np.count_nonzero(low))

    new = np.flatnonzero(exists & np.isinf(c["consolidated_at"]))
    new_live = new[live[new]]
    touched: set[int] = set()

    # the dependency step's documents (step 3), planned now so that the vectors of both
    # steps are read from the index at once (a bulk read copies the whole index); a pair of
    # documents whose live rows are all linked to the target already needs no vectors
    new_docs = set(map(store.doc_of.__getitem__, new.tolist()))
    affected = [d for d, s in store.docs.items()
                if s.depends_on and (d in new_docs or new_docs.intersection(s.depends_on))]
    plan: list[tuple[list[int], list[int]]] = []  # (live rows, live rows of one target)
    linked = store.graph.neighbours
    for d in sorted(affected):
        doc = store.docs[d]
        rows = [r for r in doc.rows if live[r]]
        for target in doc.depends_on:
            tdoc = store.docs.get(target)
            if tdoc is None or not rows:
                continue
            trows = [r for r in tdoc.rows if live[r]]
            if not trows:  # no live chunk to depend on at t (all created later)
                continue
            tset = set(trows)
            if any(tset.isdisjoint(linked("depends_on", r)) for r in rows):
                plan.append((rows, trows))
    need = _rows_in(n, new_live, np.array([r for rows, trows in plan for r in rows + trows],
                                          dtype=np.int64))
    vectors = store.index.get_vectors(need)

    # 2. contradictions among index neighbours of the new vectors
    at_need = (np.arange(len(need)) if len(need) == len(new_live)  # (then need is new_live)
               else np.searchsorted(need, new_live))
    ripple_sources = (_contradictions(store, t, new_live, vectors, at_need, live, report)
                      if len(new_live) else [])

    # 3. dependency edges from document metadata, to the closest live chunk of each target
    for rows, trows in plan:
        sims = (vectors[np.searchsorted(need, rows)]
                @ vectors[np.searchsorted(need, trows)].T)
        best = np.argmax(sims, axis=1)  # each row's closest target chunk, and if close enough
        close = sims[np.arange(len(rows)), best] >= params.dependency_similarity
        for r, j, ok in zip(rows, best.tolist(), close.tolist(), strict=True):
            if not ok or set(linked("depends_on", r)).intersection(trows):
                continue
            if store.graph.link_dependency(r, trows[j], t):
                touched.update((r, trows[j]))
                report.dependency_edges += 1
    store.refresh_edge_counts(touched, t)

    # 4. ripples from replacements made since the last pass, and from contradiction losers
    pending = np.array(store.pending_ripple, dtype=np.int64)
    is_due = c["created_at"][pending] <= t
    store.pending_ripple = pending[~is_due].tolist()
    sends = store.graph.has_any
    report.ripples += store.propagate_many(  # a ripple goes along depended_by edges only
        [src for src in pending[is_due].tolist() + ripple_sources if sends("depended_by", src)],
        t)

    # 5. archival of vectors deprecated long enough ago
    old = np.flatnonzero((c["superseded_at"] + params.archive_after_days * DAY <= t)
                         & np.isinf(c["archived_at"]))
    c["archived_at"][old] = t
    _log_all(store, old, t, "archived")
    report.archived = len(old)

    # 6. promotion: every vector seen for the first time becomes ACTIVE
    c["consolidated_at"][new_live] = t
    _log_all(store, new_live, t, "promoted")
    report.promoted = len(new_live)
    store.last_consolidated = t
    return report
