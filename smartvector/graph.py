"""Relational edges with their creation times, and the bounded-BFS ripple propagator."""

from __future__ import annotations

from collections.abc import Iterable

from .config import RippleParams

KINDS = ("depends_on", "depended_by", "supersedes", "superseded_by", "contradicts")
#: Edges that count towards the relational signal (as in the reference proof-of-concept).
RELATIONAL_KINDS = ("depends_on", "depended_by")


class EdgeGraph:
    """Directed, typed adjacency lists over integer rows; every edge keeps its time."""

    def __init__(self) -> None:
        self._adj: dict[str, dict[int, list[tuple[int, float]]]] = {k: {} for k in KINDS}

    def _add(self, kind: str, a: int, b: int, at: float) -> bool:
        lst = self._adj[kind].setdefault(a, [])
        if any(o == b for o, _ in lst):
            return False
        lst.append((b, at))
        return True

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

    def neighbours(self, kind: str, row: int, at: float | None = None) -> list[int]:
        """Rows linked from ``row`` by ``kind`` edges made at or before ``at``."""
        return [o for o, t in self._adj[kind].get(row, ()) if at is None or t <= at]

    def has(self, kind: str, a: int, b: int) -> bool:
        """Whether ``a`` has a ``kind`` edge to ``b`` (made at any time)."""
        for o, _ in self._adj[kind].get(a, ()):
            if o == b:
                return True
        return False

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
