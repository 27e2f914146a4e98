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
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from .timeutil import DAY
from .vector import ConsolidationReport, Event


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

_QUANTITY = re.compile(r"(?<![\w.])(\$?\d+(?:[.,]\d+)*)\s*(%|[a-z]+)?", re.IGNORECASE)
_DIGIT = re.compile(r"\d")


@lru_cache(maxsize=65536)
def claims(text: str) -> frozenset[str]:
    """The quantities a text states, normalised: ``"90 days"`` -> ``"90 day"``."""
    if not _DIGIT.search(text):  # no digit, no quantity (and a fast scan)
        return frozenset()
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


def _log_all(store: Consolidatable, rows: np.ndarray, t: float, kind: str) -> None:
    """``store.log(r, t, kind)`` for every row, sharing one (immutable) event object."""
    ev = Event(t, kind)
    events = store.events
    for r in rows.tolist():
        events.setdefault(r, []).append(ev)


def consolidate(store: Consolidatable, t: float) -> ConsolidationReport:
    """One consolidation pass at time ``t`` (see the module docstring).

    Vectorised over rows where the outcome does not depend on order (masks, column updates,
    one batched index search); Python loops remain only over contradiction candidates that
    pass the similarity test and over the rows whose events carry their own details.
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
        for r, cf in zip(active[low].tolist(), conf[low].tolist(), strict=True):
            store.log(r, t, "dormant", detail=f"confidence {cf:.3f} below threshold")
        report.dormant += int(np.count_nonzero(low))

    new = np.flatnonzero(exists & np.isinf(c["consolidated_at"]))
    new_live = new[live[new]]
    touched: set[int] = set()
    ripple_sources: list[int] = []

    # the dependency step's documents (step 3), planned now so that the vectors of both
    # steps are read from the index at once (a bulk read copies the whole index)
    new_docs = {store.doc_of[r] for r in new.tolist()}
    affected = [d for d, s in store.docs.items()
                if s.depends_on and (d in new_docs or new_docs.intersection(s.depends_on))]
    plan: list[tuple[list[int], list[int]]] = []  # (live rows, live rows of one target)
    for d in sorted(affected):
        doc = store.docs[d]
        rows = [r for r in doc.rows if live[r]]
        for target in doc.depends_on:
            tdoc = store.docs.get(target)
            if tdoc is None or not rows:
                continue
            trows = [r for r in tdoc.rows if live[r]]
            if trows:
                plan.append((rows, trows))
    need = np.union1d(new_live, np.array([r for rows, trows in plan for r in rows + trows],
                                         dtype=np.int64))
    vectors = store.index.get_vectors(need)

    # 2. contradictions among index neighbours of the new vectors
    if len(new_live):
        # over-fetch so that deprecated or future neighbours do not crowd out live ones
        k = min(2 * params.neighbours + 1, len(store.index))
        labels, sims = store.index.search(vectors[np.searchsorted(need, new_live)], k)
        # each new vector's first `neighbours` live neighbours (itself excluded) that are
        # similar enough, in row order then similarity order, as the pairs are resolved
        ok = live[labels] & (labels != new_live[:, None])
        ok &= np.cumsum(ok, axis=1) <= params.neighbours
        ok &= sims.astype(np.float64) >= params.contradiction_similarity
        ia, jb = np.nonzero(ok)
        doc_of, texts = store.doc_of, store.texts
        claims_of: dict[int, frozenset[str]] = {}
        for a, b, s in zip(new_live[ia].tolist(), labels[ia, jb].tolist(),
                           sims[ia, jb].tolist(), strict=True):
            if doc_of[a] == doc_of[b]:
                continue
            ca = claims_of.get(a)
            if ca is None:
                ca = claims_of[a] = claims(texts[a])
            cb = claims_of.get(b)
            if cb is None:
                cb = claims_of[b] = claims(texts[b])
            if not ca or not cb or ca & cb or store.graph.has("contradicts", a, b):
                continue
            winner, loser, why = resolve(store, a, b)
            c["lost_at"][loser] = min(c["lost_at"][loser], t)
            store.graph.link_contradicts(a, b, t)
            store.penalise(loser, params.contradiction_penalty, t, "contradiction",
                           f"lost to {store.ids[winner]} ({why})")
            ripple_sources.append(loser)
            report.contradictions += 1
            report.details.append(
                f"contradiction {store.ids[a]} ~ {store.ids[b]} (cos {s:.2f}): "
                f"kept {store.ids[winner]} ({why})")

    # 3. dependency edges from document metadata, to the closest live chunk of each target
    for rows, trows in plan:
        sims = (vectors[np.searchsorted(need, rows)]
                @ vectors[np.searchsorted(need, trows)].T)
        for i, r in enumerate(rows):
            linked = set(store.graph.neighbours("depends_on", r))
            if linked.intersection(trows):
                continue
            j = int(np.argmax(sims[i]))
            if sims[i, j] >= params.dependency_similarity:
                if store.graph.link_dependency(r, trows[j], t):
                    touched.update((r, trows[j]))
                    report.dependency_edges += 1
    store.refresh_edge_counts(touched, t)

    # 4. ripples from replacements made since the last pass, and from contradiction losers
    due = [r for r in store.pending_ripple if c["created_at"][r] <= t]
    store.pending_ripple = [r for r in store.pending_ripple if not c["created_at"][r] <= t]
    for src in due + ripple_sources:
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
