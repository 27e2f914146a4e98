"""Relational edges with their creation times, and the bounded-BFS ripple propagator."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .config import RippleParams

KINDS = ("depends_on", "depended_by", "supersedes", "superseded_by", "contradicts")
#: Edges that count towards the relational signal (as in the reference proof-of-concept).
RELATIONAL_KINDS = ("depends_on", "depended_by")
#: a row with this many edges of a kind gets a set of their targets for the duplicate test
#: of a new edge (shorter lists are scanned: a set per row would cost memory for nothing)
_SCAN = 32


class EdgeGraph:
    """Directed, typed adjacency lists over integer rows; every edge keeps its time.

    The times of each row's relational edges (:data:`RELATIONAL_KINDS`) are also kept in
    arrays, a chain per row (:attr:`relational_times`), so that compiled code can count the
    edges a row had at a past time without the lists."""

    def __init__(self) -> None:
        self._adj: dict[str, dict[int, list[tuple[int, float]]]] = {k: {} for k in KINDS}
        # (kind, row) -> the targets of a row's list of _SCAN or more edges: built when the
        # list reaches that length, kept up to date by every append after it
        self._targets: dict[tuple[str, int], set[int]] = {}
        self._rel_head = np.full(0, -1, np.int64)
        self._rel_time = np.empty(0, np.float64)
        self._rel_prev = np.empty(0, np.int64)
        self._rel_n = 0

    def _add(self, kind: str, a: int, b: int, at: float) -> bool:
        lst = self._adj[kind].setdefault(a, [])
        if len(lst) < _SCAN:
            if any(o == b for o, _ in lst):
                return False
        else:  # a hub (a long document's chunks supersede each of the old version's)
            seen = self._targets.get((kind, a))
            if seen is None:
                seen = self._targets[(kind, a)] = {o for o, _ in lst}
            if b in seen:
                return False
            seen.add(b)
        lst.append((b, at))
        if kind in RELATIONAL_KINDS:
            self._log_relational(a, at)
        return True

    def _log_relational(self, row: int, at: float) -> None:
        """Append a relational edge of ``row`` made at ``at`` to the row's chain."""
        n = self._rel_n
        if row >= len(self._rel_head):
            head = np.full(max(2 * len(self._rel_head), row + 1, 64), -1, np.int64)
            head[:len(self._rel_head)] = self._rel_head
            self._rel_head = head
        if n == len(self._rel_time):
            size = max(2 * n, 64)
            self._rel_time = np.resize(self._rel_time, size)
            self._rel_prev = np.resize(self._rel_prev, size)
        self._rel_time[n] = at
        self._rel_prev[n] = self._rel_head[row]
        self._rel_head[row] = n
        self._rel_n = n + 1

    @property
    def relational_times(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(head, time, prev)``: the relational edges of row ``r`` are the entries
        ``k = head[r]``, then ``k = prev[k]``... until -1 (a row beyond ``head`` has none),
        each made at ``time[k]``; the number with ``time[k] <= t`` is
        ``count(RELATIONAL_KINDS, r, t)``. The arrays are replaced, not updated in place,
        when they grow: read them again after adding edges."""
        return self._rel_head, self._rel_time, self._rel_prev

    def link_dependency(self, dependent: int, target: int, at: float) -> bool:
        """``dependent`` depends_on ``target`` (and ``target`` depended_by ``dependent``)."""
        if dependent == target:
            return False
        added = self._add("depends_on", dependent, target, at)
        self._add("depended_by", target, dependent, at)
        return added

    def link_supersedes(self, new: int, old: int, at: float) -> None:
        self._add("supersedes", new, old, at)
        self._add("superseded_by", old, new, at)

    def link_contradicts(self, a: int, b: int, at: float) -> bool:
        added = self._add("contradicts", a, b, at)
        self._add("contradicts", b, a, at)
        return added

    def link_contradicts_many(self, a: np.ndarray, b: np.ndarray, at: float) -> np.ndarray:
        """:meth:`link_contradicts` of every pair ``(a[i], b[i])`` in turn, at once: the same
        adjacency lists, in the same order (duplicates ignored); returns what each call would
        (whether ``a[i] -> b[i]`` was new)."""
        a, b = np.asarray(a, np.int64).reshape(-1), np.asarray(b, np.int64).reshape(-1)
        src, dst = np.empty(2 * len(a), np.int64), np.empty(2 * len(a), np.int64)
        src[0::2], src[1::2], dst[0::2], dst[1::2] = a, b, b, a  # the calls' order of edges
        new = ~self.has_many("contradicts", src, dst)
        code = src[new] * (int(max(src.max(initial=0), dst.max(initial=0))) + 1) + dst[new]
        keep = np.zeros(len(code), bool)
        keep[np.unique(code, return_index=True)[1]] = True  # the first of repeated edges
        new[np.flatnonzero(new)[~keep]] = False
        adj = self._adj["contradicts"]
        get, targets = adj.get, self._targets
        for x, y in zip(src[new].tolist(), dst[new].tolist(), strict=True):
            lst = get(x)
            if lst is None:
                adj[x] = [(y, at)]
            else:
                lst.append((y, at))
                if len(lst) > _SCAN:
                    seen = targets.get(("contradicts", x))
                    if seen is not None:
                        seen.add(y)
        return new[0::2]

    def neighbours(self, kind: str, row: int, at: float | None = None) -> list[int]:
        """Rows linked from ``row`` by ``kind`` edges made at or before ``at``."""
        return [o for o, t in self._adj[kind].get(row, ()) if at is None or t <= at]

    def has(self, kind: str, a: int, b: int) -> bool:
        """Whether ``a`` has a ``kind`` edge to ``b`` (made at any time)."""
        for o, _ in self._adj[kind].get(a, ()):
            if o == b:
                return True
        return False

    def has_many(self, kind: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """:meth:`has` of every pair ``(a[i], b[i])``, as a boolean array (Python work only
        over the edges of the rows of ``a`` that have any)."""
        a, b = np.asarray(a, np.int64).reshape(-1), np.asarray(b, np.int64).reshape(-1)
        adj = self._adj[kind]
        out = np.zeros(len(a), bool)
        if not adj or not len(a):
            return out
        rows = np.unique(a).tolist()
        linked = [(r, o) for r in rows for o, _ in adj.get(r, ())]
        if not linked:
            return out
        src, dst = np.array(linked, np.int64).T
        width = int(max(a.max(), b.max(), dst.max())) + 1
        return np.isin(a * width + b, src * width + dst)

    def has_any(self, kind: str, row: int) -> bool:
        """Whether ``row`` has any ``kind`` edge (made at any time)."""
        return bool(self._adj[kind].get(row))

    def last_time(self, row: int) -> float:
        """Time of the latest edge of any kind from ``row`` (``-inf`` if it has none)."""
        return max((t for adj in self._adj.values() for _, t in adj.get(row, ())),
                   default=float("-inf"))

    def count(self, kinds: Iterable[str], row: int, at: float | None = None) -> int:
        return sum(len(self.neighbours(k, row, at)) for k in kinds)

    def to_dict(self) -> dict:
        return {k: {str(r): v for r, v in adj.items()} for k, adj in self._adj.items()}

    @classmethod
    def from_dict(cls, data: dict) -> EdgeGraph:
        g = cls()
        for k in KINDS:
            g._adj[k] = {int(r): [(int(o), float(t)) for o, t in v]
                         for r, v in data.get(k, {}).items()}
        for k in RELATIONAL_KINDS:
            for r, edges in g._adj[k].items():
                for _, t in edges:
                    g._log_relational(r, t)
        return g


def ripple(
    graph: EdgeGraph, source: int, params: RippleParams, at: float | None = None
) -> list[tuple[int, int, float]]:
    """Bounded BFS along ``depended_by`` from ``source``.

    Returns ``(row, depth, penalty)`` with ``penalty = p / (depth + 1)``: direct dependents
    are depth 0, and nothing at depth ``max_depth`` or beyond is reached. A visited set makes
    cycles terminate and gives each row at most one penalty (at its shallowest depth).
    """
    out: list[tuple[int, int, float]] = []
    visited = {source}
    frontier = [source]
    for depth in range(params.max_depth):
        nxt: list[int] = []
        for v in frontier:
            for d in graph.neighbours("depended_by", v, at):
                if d not in visited:
                    visited.add(d)
                    out.append((d, depth, params.penalty / (depth + 1)))
                    nxt.append(d)
        if not nxt:
            break
        frontier = nxt
    return out
