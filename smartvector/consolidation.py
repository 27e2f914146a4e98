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
keeps similar queries together (faster, same results). ``ConsolidationParams.search_ef``, when
set, bounds it: the index's ``ef_search`` for this search only (lower: faster, and it may miss
some neighbours, hence some contradictions); None (the default) keeps the index's own.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from .timeutil import DAY
from .vector import ConsolidationReport, Event

_ORDER_MIN = 50_000  # fewer new vectors are searched in row order (ordering would not pay)
_SEARCH_BLOCK = 32768  # queries per index search (and rows per pivot product)
_PIVOTS = 64  # pivots per level of the search's locality order


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
    def propagate(self, row: int, at: float) -> int: ...
    def refresh_edge_counts(self, rows: Any, t: float) -> None: ...

#: a number (optionally "$"-prefixed, not preceded by a word character or ".") and its unit:
#: ``(?<![\w.])(\$?\d+(?:[.,]\d+)*)\s*(%|[a-z]+)?``, spelt so that it starts with a character
#: class (the engine then skips to the next "$" or digit instead of trying every position)
_QUANTITY = re.compile(r"([$\d](?<=(?<![\w.])[$\d])(?<=[^$]|\$(?=\d))\d*(?:[.,]\d+)*)\s*"
                       r"(%|[a-z]+)?", re.IGNORECASE)


@lru_cache(maxsize=65536)
def claims(text: str) -> frozenset[str]:
    """The quantities a text states, normalised: ``"90 days"`` -> ``"90 day"``."""
    out = set()
    for num, unit in _QUANTITY.findall(text):
        num = num.replace(",", "")
        unit = (unit or "").lower()
        if len(unit) > 3 and unit.endswith("s"):
            unit = unit[:-1]
        out.add(f"{num} {unit}".strip())
    return frozenset(out)


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
    for name, va, vb in (
        ("recency", ca, cb),
        ("authority", aa, ab),
        ("feedback", c["positive"][a] - c["negative"][a], c["positive"][b] - c["negative"][b]),
    ):
        voted = va != vb
        for_a = voted & (va > vb)
        votes += for_a.astype(np.int64) - (voted & ~for_a)
        reasons.append((name, np.where(voted, np.where(for_a, a, b), -1).tolist()))
    a_wins = np.where(votes != 0, votes > 0,
                      np.where(aa != ab, aa > ab, np.where(ca != cb, ca > cb, a < b)))
    why = [", ".join(f"{name}:{ids[w]}" for (name, _), w in zip(reasons, ws, strict=True)
                     if w >= 0) or "tie"
           for ws in zip(*(r for _, r in reasons), strict=True)]
    return np.where(a_wins, a, b), np.where(a_wins, b, a), why


def _spaced(n: int, m: int) -> np.ndarray:
    """``min(n, m)`` evenly spaced indices into ``range(n)``."""
    return np.unique(np.linspace(0, n - 1, min(n, m)).astype(np.int64))


def _nearest(vectors: np.ndarray, rows: np.ndarray, pivots: np.ndarray) -> np.ndarray:
    """For each of ``rows`` (of ``vectors``), the index of its most similar of ``pivots``."""
    p = vectors[pivots].T
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
    """``index.search(vectors[rows], k)``, row for row the same.

    An HNSW index (one with an ``ef_search``) answers each query on its own, so from
    ``_ORDER_MIN`` queries up it is searched in blocks of ``_SEARCH_BLOCK`` queries in
    :func:`_locality_order`; other indexes are searched in one batch (the exact index's
    matrix products may round differently in batches of another shape). ``ef`` (when not
    None) replaces an HNSW index's ``ef_search`` during the search: a lower one is faster
    and may miss neighbours."""
    saved = getattr(index, "ef_search", None)
    if saved is None:
        return index.search(vectors[rows], k)
    order = (_locality_order(vectors, rows) if len(rows) >= _ORDER_MIN
             else np.arange(len(rows)))
    if ef is not None:
        index.ef_search = ef
    try:
        found = [index.search(vectors[rows[order[s:s + _SEARCH_BLOCK]]], k)
                 for s in range(0, len(rows), _SEARCH_BLOCK)]
    finally:
        index.ef_search = saved
    where = np.empty(len(rows), np.int64)
    where[order] = np.arange(len(rows))
    return (np.concatenate([f[0] for f in found])[where],
            np.concatenate([f[1] for f in found])[where])


def _contradictions(store: Consolidatable, t: float, new_live: np.ndarray, vectors: np.ndarray,
                    rows: np.ndarray, live: np.ndarray, report: ConsolidationReport
                    ) -> list[int]:
    """Step 2 of :func:`consolidate`: find and resolve the contradictions between the new
    vectors ``new_live`` (``vectors[rows]``) and their index neighbours; returns the losers,
    in the order they lost.

    Every test but the last is vectorised over all candidate pairs (each new vector's first
    ``neighbours`` live neighbours, itself excluded, similar enough, in row order then
    similarity order): another document, both texts state quantities and none agree, the
    pair not linked before nor met earlier in this pass; claims are compared as integer codes
    where each side states one quantity. The pairs left are resolved at once, then linked,
    penalised and reported one by one, in that order."""
    params = store.config.consolidation
    c = store.columns
    k = min(2 * params.neighbours + 1, len(store.index))
    labels, sims = _search(store.index, vectors, rows, k, params.search_ef)
    # over-fetched so that deprecated or future neighbours do not crowd out live ones
    ok = live[labels] & (labels != new_live[:, None])
    ok &= np.cumsum(ok, axis=1) <= params.neighbours
    ok &= sims.astype(np.float64) >= params.contradiction_similarity
    ia, jb = np.nonzero(ok)
    a, b, s = new_live[ia], labels[ia, jb], sims[ia, jb]
    doc_of = np.array(store.doc_of, dtype=object)
    other = doc_of[a] != doc_of[b]
    a, b, s = a[other], b[other], s[other]
    # claims of every row involved, coded: -1 none, -2 several, else the id of its one claim
    seen = np.unique(np.concatenate([a, b]))
    stated = [claims(store.texts[r]) for r in seen.tolist()]
    ids: dict[str, int] = {}
    code = np.array([-1 if not q else -2 if len(q) > 1 else ids.setdefault(next(iter(q)),
                                                                           len(ids))
                     for q in stated], dtype=np.int64)
    at_row = np.empty(len(store), np.int64)  # row -> its index in seen
    at_row[seen] = np.arange(len(seen))
    pa, pb = at_row[a], at_row[b]
    qa, qb = code[pa], code[pb]
    differ = (qa >= 0) & (qb >= 0) & (qa != qb)
    several = np.flatnonzero(((qa == -2) & (qb != -1)) | ((qb == -2) & (qa != -1)))
    differ[several] = [stated[i].isdisjoint(stated[j])
                       for i, j in zip(pa[several].tolist(), pb[several].tolist(), strict=True)]
    a, b, s = a[differ], b[differ], s[differ]
    has = store.graph.has
    fresh = np.flatnonzero([not has("contradicts", x, y)
                            for x, y in zip(a.tolist(), b.tolist(), strict=True)])
    # a pair met twice (each is a neighbour of the other) is resolved at its first meeting
    pair = np.minimum(a[fresh], b[fresh]) * len(store) + np.maximum(a[fresh], b[fresh])
    first = np.sort(fresh[np.unique(pair, return_index=True)[1]])
    a, b, s = a[first], b[first], s[first]
    winner, loser, why = _resolve_many(store, a, b)
    np.minimum.at(c["lost_at"], loser, t)
    link, penalise, ids_of = store.graph.link_contradicts, store.penalise, store.ids
    amount, details = params.contradiction_penalty, report.details
    for x, y, sim, w, lo, reason in zip(a.tolist(), b.tolist(), s.tolist(), winner.tolist(),
                                        loser.tolist(), why, strict=True):
        link(x, y, t)
        penalise(lo, amount, t, "contradiction", f"lost to {ids_of[w]} ({reason})")
        details.append(f"contradiction {ids_of[x]} ~ {ids_of[y]} (cos {sim:.2f}): "
                       f"kept {ids_of[w]} ({reason})")
    report.contradictions += len(a)
    return loser.tolist()


def _log_all(store: Consolidatable, rows: np.ndarray, t: float, kind: str,
             details: list[str] | None = None) -> None:
    """``store.log(r, t, kind, detail=details[i])`` for every row ``r = rows[i]`` (no detail
    if ``details`` is None), rows with the same detail sharing one (immutable) event object.
    Only for kinds that change no count (the store's log does nothing more for them)."""
    events = store.events
    if details is None:
        ev = Event(t, kind)
        for r in rows.tolist():
            events.setdefault(r, []).append(ev)
        return
    shared: dict[str, Event] = {}
    for r, d in zip(rows.tolist(), details, strict=True):
        ev = shared.get(d)
        if ev is None:
            ev = shared[d] = Event(t, kind, 0.0, d)
        events.setdefault(r, []).append(ev)


def consolidate(store: Consolidatable, t: float) -> ConsolidationReport:
    """One consolidation pass at time ``t`` (see the module docstring).

    Vectorised over rows where the outcome does not depend on order (masks, column updates,
    the batched index search, the tests of contradiction candidates and their resolution);
    Python loops remain over the contradictions found (edges, penalties, details), the
    dependency rows, the ripple sources that have dependents, and event logging.
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
    new_docs = {store.doc_of[r] for r in new.tolist()}
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
            tset = set(trows)
            if any(tset.isdisjoint(linked("depends_on", r)) for r in rows):
                plan.append((rows, trows))
    need = np.union1d(new_live, np.array([r for rows, trows in plan for r in rows + trows],
                                         dtype=np.int64))
    vectors = store.index.get_vectors(need)

    # 2. contradictions among index neighbours of the new vectors
    ripple_sources = (_contradictions(store, t, new_live, vectors,
                                      np.searchsorted(need, new_live), live, report)
                      if len(new_live) else [])

    # 3. dependency edges from document metadata, to the closest live chunk of each target
    for rows, trows in plan:
        sims = (vectors[np.searchsorted(need, rows)]
                @ vectors[np.searchsorted(need, trows)].T)
        for i, r in enumerate(rows):
            if set(linked("depends_on", r)).intersection(trows):
                continue
            j = int(np.argmax(sims[i]))
            if sims[i, j] >= params.dependency_similarity:
                if store.graph.link_dependency(r, trows[j], t):
                    touched.update((r, trows[j]))
                    report.dependency_edges += 1
    store.refresh_edge_counts(touched, t)

    # 4. ripples from replacements made since the last pass, and from contradiction losers
    pending = np.array(store.pending_ripple, dtype=np.int64)
    is_due = c["created_at"][pending] <= t
    store.pending_ripple = pending[~is_due].tolist()
    sends = store.graph.has_any
    for src in pending[is_due].tolist() + ripple_sources:
        if sends("depended_by", src):  # a ripple goes along depended_by edges only
            report.ripples += store.propagate(src, t)

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
