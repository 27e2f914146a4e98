"""Running totals of each vector's counting events, for "as of" lookups in compiled code.

Feedback (accepted / corrected), accesses and penalties (ripple, contradiction) change a
vector's confidence; a query in the past must count only those recorded by then. The event
lists (``store.events``) say so but are Python objects; this log keeps, per counting event,
the vector's totals after it (positive, negative, accesses, penalty) and its time, chained
to the vector's previous counting event and, by a jump pointer, to one further back. Walking a
vector's chain back from its latest event to the first one at or before ``t`` (in O(log n)
steps: a vector accessed by every query has a long chain) gives its totals as of ``t``,
summed in the same order as a replay of its events. That holds while each vector's counting
events arrive in time order; a vector that receives one out of order is marked
(``head == -2``) and replayed from its event list instead.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .kernels import log_count  # compiled: kernels.record_access appends alike

#: event kind -> which total it changes (0 positive, 1 negative, 2 accesses, 3 penalty)
COUNTING = {"accepted": 0, "corrected": 1, "access": 2, "ripple": 3, "contradiction": 3}
UNORDERED = -2


class CountLog:
    """Growable arrays: ``values`` (5, events) = totals after each event and its time (row 4),
    ``links`` (3, events) = the same vector's previous counting event (row 0, -1: none), a jump
    pointer further back (row 1) and the event's depth in the vector's chain (row 2), ``head``
    = each vector's latest counting event (-1: none, -2: out of time order)."""

    def __init__(self, rows: int = 0, capacity: int = 1024) -> None:
        self.n = 0
        self.values = np.zeros((5, max(1, capacity)), np.float64)
        self.links = np.full((3, max(1, capacity)), -1, np.int64)
        self.head = np.full(max(1, rows, 1024), -1, np.int64)

    @property
    def prev(self) -> np.ndarray:
        """Each event's previous event of the same vector (-1: none)."""
        return self.links[0]

    def reserve(self, rows: int, events: int) -> None:
        """Room for ``rows`` vectors and ``events`` more events."""
        if rows > len(self.head):
            grown = np.full(max(rows, 2 * len(self.head)), -1, np.int64)
            grown[: len(self.head)] = self.head
            self.head = grown
        need = self.n + events
        if need > self.links.shape[1]:
            cap = max(need, 2 * self.links.shape[1])
            values = np.zeros((5, cap), np.float64)
            values[:, : self.n] = self.values[:, : self.n]
            links = np.full((3, cap), -1, np.int64)
            links[:, : self.n] = self.links[:, : self.n]
            self.values, self.links = values, links

    def add(self, row: int, at: float, kind: str, delta: float) -> None:
        """Record one event (ignored unless its kind counts)."""
        which = COUNTING.get(kind)
        if which is None:
            return
        self.reserve(row + 1, 1)
        self.n = log_count(row, float(at), which, -delta if which == 3 else 1.0, self.head,
                           self.values, self.links, self.n)

    def add_many(self, rows: np.ndarray, at: float, kind: str, deltas: np.ndarray) -> None:
        """:meth:`add` of ``(rows[i], at, kind, deltas[i])`` for every ``i`` in turn, at once:
        the same entries, jump pointers and marks (all at one time ``at``).

        A row's new events form a chain after its latest one; the chains are written one
        link per step over all rows (step ``j``: every row's ``j``-th new event), each step
        reading the previous step's links, as :func:`~smartvector.kernels.log_count` would."""
        which = COUNTING.get(kind)
        rows = np.asarray(rows, np.int64).reshape(-1)
        if which is None or not len(rows):
            return
        amount = (-np.asarray(deltas, np.float64).reshape(-1) if which == 3
                  else np.ones(len(rows)))
        # grown as one call after another grows it (the same capacities)
        size = len(self.head)
        peak = np.maximum.accumulate(rows) + 1
        i = int(np.searchsorted(peak, size, side="right"))
        while i < len(peak):
            size = max(int(peak[i]), 2 * size)
            i = int(np.searchsorted(peak, size, side="right"))
        self.reserve(size, 0)
        # a row marked out of order stays so; a row whose latest event is later than ``at``
        # is marked and logs none of these (each would find the mark)
        head = self.head
        by_row = np.argsort(rows, kind="stable")
        ranked = rows[by_row]
        starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
        counts = np.diff(np.r_[starts, len(rows)])  # events per distinct row
        u = ranked[starts]
        k = head[u]
        late = (k >= 0) & (at < self.values[4, np.maximum(k, 0)])
        head[u[late]] = UNORDERED
        logs = ~late & (k != UNORDERED)
        kept = by_row[np.repeat(logs, counts)]  # the events logged, by row then in order
        keep = np.zeros(len(rows), bool)
        keep[kept] = True
        cap = self.links.shape[1]
        need = self.n + int(np.count_nonzero(keep[:-1])) + 1  # the last call's
        while cap < need:
            cap *= 2
        self.reserve(0, cap - self.n)
        values, links = self.values, self.links
        m = len(kept)
        if not m:
            return
        at_ = np.empty(len(rows), np.int64)  # where each logged event goes
        at_[keep] = self.n + np.arange(m)
        counts = counts[logs]
        step = np.arange(m) - np.repeat(np.cumsum(counts) - counts, counts)  # j, by kept
        prev = np.empty(len(rows), np.int64)  # each event's previous one in its row's chain
        first = step == 0
        prev[kept[first]] = head[rows[kept[first]]]
        prev[kept[~first]] = at_[kept[np.flatnonzero(~first) - 1]]
        order = np.argsort(step, kind="stable")
        bounds = np.searchsorted(step[order], np.arange(int(step.max()) + 2))
        for j in range(len(bounds) - 1):
            sel = kept[order[bounds[j]:bounds[j + 1]]]
            kk, nn = prev[sel], at_[sel]
            some = kk >= 0
            kp = np.maximum(kk, 0)
            values[:4, nn] = np.where(some, values[:4, kp], 0.0)
            values[which, nn] += amount[sel]
            values[4, nn] = at
            links[0, nn] = kk
            jp = links[1, kp]
            jj = np.where(jp >= 0, links[1, np.maximum(jp, 0)], -1)
            depth_j = np.where(jp >= 0, links[2, np.maximum(jp, 0)], -1)
            depth_jj = np.where(jj >= 0, links[2, np.maximum(jj, 0)], -1)
            skew = links[2, kp] - depth_j == depth_j - depth_jj
            links[1, nn] = np.where(some, np.where(skew, jj, kk), -1)
            links[2, nn] = np.where(some, links[2, kp] + 1, 0)
        last = kept[np.cumsum(counts) - 1]
        head[rows[last]] = at_[last]
        self.n += m

    @classmethod
    def from_events(cls, rows: int, events: dict[int, Iterable]) -> CountLog:
        """The log of existing event lists (after loading a store)."""
        log = cls(rows)
        for r in sorted(events):
            for ev in events[r]:
                log.add(r, ev.at, ev.kind, ev.delta)
        return log
