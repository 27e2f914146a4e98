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

from .kernels import log_count, log_counts  # compiled: kernels.record_access appends alike

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
        the same entries, jump pointers, marks and capacities. The events are logged by one
        compiled loop (:func:`~smartvector.kernels.log_counts`), which hands back to
        :meth:`reserve` wherever one :meth:`add` after another would grow the arrays."""
        which = COUNTING.get(kind)
        rows = np.ascontiguousarray(rows, np.int64).reshape(-1)
        if which is None or not len(rows):
            return
        amount = (-np.asarray(deltas, np.float64).reshape(-1) if which == 3
                  else np.ones(len(rows)))
        if len(amount) != len(rows):
            raise ValueError(f"{len(rows)} rows but {len(amount)} deltas")
        at, i = float(at), 0
        while True:
            i, self.n = log_counts(rows, at, which, amount, self.head, self.values,
                                   self.links, self.n, i)
            if i == len(rows):
                return
            self.reserve(int(rows[i]) + 1, 1)  # as add() would before rows[i]

    @classmethod
    def from_events(cls, rows: int, events: dict[int, Iterable]) -> CountLog:
        """The log of existing event lists (after loading a store)."""
        log = cls(rows)
        for r in sorted(events):
            for ev in events[r]:
                log.add(r, ev.at, ev.kind, ev.delta)
        return log
