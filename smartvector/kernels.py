"""Compiled (numba) kernels of the query path: the per-query work on a small pool.

A query touches a few to a few hundred rows, where each numpy call costs more in overhead
than in arithmetic (and numpy's wide SIMD instructions slow the index search that follows on
this hardware); these kernels fuse the filtering, the signals, the ranking and the access
bookkeeping into three calls. The formulas are those of :mod:`smartvector.scoring` and
:mod:`smartvector.confidence` (the reference), evaluated in the same order; only ``exp2`` and
``log1p`` come from the C library instead of numpy's SIMD versions, which differ in the last
bit (tests check the agreement and the order).

Compiled on first use and cached on disk next to this module (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .columns import FIELDS

DAY = 86400.0

# columns of the float64 (``floats``) and int32 (``ints``) blocks (``Columns.block``)
CREATED, VFROM, VTO = FIELDS["created_at"][1], FIELDS["valid_from"][1], FIELDS["valid_to"][1]
BASE, PEN = FIELDS["base_confidence"][1], FIELDS["penalty"][1]
SUP, LOST = FIELDS["superseded_at"][1], FIELDS["lost_at"][1]
CONS, DORM, ARCH = (FIELDS["consolidated_at"][1], FIELDS["dormant_at"][1],
                    FIELDS["archived_at"][1])
LAST_EVENT, EDGES_CHANGED = FIELDS["last_event_at"][1], FIELDS["edges_changed_at"][1]
LAST_ACCESSED = FIELDS["last_accessed"][1]
POS, NEG, ACC, NREL = (FIELDS["positive"][1], FIELDS["negative"][1], FIELDS["accesses"][1],
                       FIELDS["n_rel_edges"][1])

# layout of the float64 parameter vector (see :func:`pack_params`)
P_T_VALIDITY, P_T_HALF, P_T_OUTSIDE = 0, 1, 2
P_C_VALIDITY, P_C_HALF, P_C_FLOOR, P_C_POS, P_C_NEG, P_C_ACC_R, P_C_ACC_CAP = 3, 4, 5, 6, 7, 8, 9
P_R_SCALE, P_R_CAP = 10, 11
P_WS, P_WT, P_WC, P_WR = 12, 13, 14, 15
N_PARAMS = 16

@njit(cache=True)
def query_problem(x):
    """0 for a usable query vector, 1 if it is all zeros, 2 if it has a NaN or infinity."""
    zero = True
    for v in x:
        if not np.isfinite(v):
            return 2
        if v != 0:
            zero = False
    return 1 if zero else 0


@njit(cache=True)
def visible_share(floats, n, t, lifecycle):
    """Share of rows visible at ``t`` among every ``step``-th of the first ``n`` (the
    estimate :meth:`SmartVectorStore.visible_share` documents)."""
    step = max(1, n // 1024)
    seen = 0
    vis = 0
    for r in range(0, n, step):
        seen += 1
        if floats[r, CREATED] <= t and not (lifecycle and floats[r, SUP] <= t):
            vis += 1
    return vis / max(seen, 1)


@njit(cache=True)
def first_visible(query, labels, sims, from_distance, t, floats, lifecycle, n):
    """The first ``n`` rows of an index result (ordered by similarity descending, then
    label) that are visible at ``t``; ``kept`` is ``-query_problem(query)`` (and nothing is
    returned) when the query vector was unusable (hnswlib answers such queries anyway).

    ``labels``/``sims`` are one query's result as the index returned it (``from_distance``:
    ``sims`` are hnswlib's cosine distances, similarity ``1 - d`` in float32); ties in
    similarity are re-ordered by label as :func:`smartvector.index._order` does. Returns the
    rows, their similarities (float64), how many there are (``n`` once enough were found:
    the rest of the result is not read), and whether any of them has events, or edges,
    recorded after ``t`` (then they must be replayed)."""
    bad = query_problem(query)
    m = 0 if bad else labels.shape[0]
    lab = np.empty(m, np.int64)
    sim = np.empty(m, np.float32)
    for i in range(m):
        lab[i] = labels[i]
        sim[i] = np.float32(1.0) - sims[i] if from_distance else sims[i]
    # insertion sort by (-sim, label): the index's output is sorted by similarity already,
    # so this only moves tied runs (linear time when there is nothing to move)
    for i in range(1, m):
        s, lb = sim[i], lab[i]
        j = i - 1
        while j >= 0 and (sim[j] < s or (sim[j] == s and lab[j] > lb)):
            sim[j + 1] = sim[j]
            lab[j + 1] = lab[j]
            j -= 1
        sim[j + 1] = s
        lab[j + 1] = lb
    rows = np.empty(min(n, m), np.int64)
    sem = np.empty(min(n, m), np.float64)
    kept = 0
    late_events = False
    late_edges = False
    for i in range(m):
        r = lab[i]
        if floats[r, CREATED] <= t and not (lifecycle and floats[r, SUP] <= t):
            rows[kept] = r
            sem[kept] = sim[i]
            if floats[r, LAST_EVENT] > t:
                late_events = True
            if floats[r, EDGES_CHANGED] > t:
                late_edges = True
            kept += 1
            if kept == n:  # enough: the rest is never read (nor its cache lines)
                break
    return rows[:kept], sem[:kept], -bad if bad else kept, late_events, late_edges


@njit(cache=True)
def _ended(floats, r, t):
    """When row ``r`` stopped being in force by ``t`` (store.ended_at)."""
    e = np.inf
    if floats[r, SUP] <= t:
        e = floats[r, SUP]
    if floats[r, LOST] <= t and floats[r, LOST] < e:
        e = floats[r, LOST]
    return e


@njit(cache=True)
def _rank_order(score, rows):
    """Positions sorted by score descending, then row ascending (``np.lexsort((rows,
    -score))`` for distinct rows): a bottom-up merge sort (compiles much faster than
    numba's ``np.argsort``)."""
    m = score.shape[0]
    idx = np.arange(m)
    tmp = np.empty(m, np.int64)
    width = 1
    while width < m:
        for lo in range(0, m, 2 * width):
            mid, hi = min(lo + width, m), min(lo + 2 * width, m)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                a, b = idx[i], idx[j]
                if score[b] > score[a] or (score[b] == score[a] and rows[b] < rows[a]):
                    tmp[k] = b
                    j += 1
                else:
                    tmp[k] = a
                    i += 1
                k += 1
            while i < mid:
                tmp[k] = idx[i]
                i += 1
                k += 1
            while j < hi:
                tmp[k] = idx[j]
                j += 1
                k += 1
        idx, tmp = tmp, idx
        width *= 2
    return idx


@njit(cache=True)
def _worse(sa, la, sb, lb):
    """Whether similarity ``sa`` of label ``la`` ranks below ``sb`` of ``lb`` (lower, or
    equal with a larger label)."""
    return sa < sb or (sa == sb and la > lb)


@njit(cache=True)
def top_k(sims, labels, k):
    """The ``k`` best columns of each row of ``sims`` (q, n; float32), by similarity
    descending then label ascending (distinct labels): their labels and similarities, (q, k)
    each, ``k`` at most n. What a sort of the whole row by ``(-sim, label)`` keeps, in
    O(n log k) a row (a heap of the k best so far), for an exact index's search.
    """
    q, n = sims.shape
    k = min(k, n)
    out_l = np.empty((q, k), np.int64)
    out_s = np.empty((q, k), np.float32)
    hs = np.empty(k, np.float32)  # a heap of the best k so far, the worst of them at 0
    hl = np.empty(k, np.int64)
    for r in range(q):
        m = 0
        for c in range(n):
            s, lb = sims[r, c], labels[c]
            if m < k:  # fill: sift the new one up past every parent it ranks below
                i = m
                m += 1
                while i > 0:
                    p = (i - 1) // 2
                    if not _worse(s, lb, hs[p], hl[p]):
                        break
                    hs[i], hl[i] = hs[p], hl[p]
                    i = p
                hs[i], hl[i] = s, lb
            elif _worse(hs[0], hl[0], s, lb):  # better than the worst kept: replace it
                i = 0
                while True:
                    a = 2 * i + 1
                    if a >= k:
                        break
                    if a + 1 < k and _worse(hs[a + 1], hl[a + 1], hs[a], hl[a]):
                        a += 1
                    if not _worse(hs[a], hl[a], s, lb):
                        break
                    hs[i], hl[i] = hs[a], hl[a]
                    i = a
                hs[i], hl[i] = s, lb
        order = _rank_order(hs, hl)
        for j in range(k):
            out_l[r, j] = hl[order[j]]
            out_s[r, j] = hs[order[j]]
    return out_l, out_s


@njit(cache=True)
def _totals(rows, t, floats, ints, counts, head, log_values, log_links):
    """Positive, negative, accesses and penalty of each row as of ``t`` (one column per row):
    from ``counts`` when given, else from the columns, or for rows with events after ``t``
    from the count log (:mod:`smartvector.countlog`). ``ok`` is False when a row's log is out
    of time order (the caller replays its events)."""
    m = rows.shape[0]
    out = np.empty((4, m), np.float64)
    ok = True
    for i in range(m):
        r = rows[i]
        if counts.shape[1]:
            for f in range(4):
                out[f, i] = counts[f, i]
        elif floats[r, LAST_EVENT] > t:
            k = head[r] if r < head.shape[0] else -1
            if k == -2:
                ok = False
                break
            while k >= 0 and log_values[4, k] > t:  # times fall along the chain
                j = log_links[1, k]
                k = j if j >= 0 and log_values[4, j] > t else log_links[0, k]
            for f in range(4):
                out[f, i] = log_values[f, k] if k >= 0 else 0.0
        else:
            out[0, i] = float(ints[r, POS])
            out[1, i] = float(ints[r, NEG])
            out[2, i] = float(ints[r, ACC])
            out[3, i] = floats[r, PEN]
    return out, ok


@njit(cache=True)
def rank(rows, sem, t, floats, ints, counts, edges, params, head, log_values, log_links):
    """Signals, score, order (score descending, then row) and status of a pool.

    ``counts`` (positive, negative, accesses, penalty as of ``t``; one column per row) and
    ``edges`` (relational edges as of ``t``) replace what the columns and the count log say
    when not empty. Returns the rows in rank order, a (5, m) array of score, semantic,
    temporal, confidence and relational in that order, the rows' status codes, and False
    (with nothing ranked) if a row's counts must be replayed from its events."""
    m = rows.shape[0]
    tot, ok = _totals(rows, t, floats, ints, counts, head, log_values, log_links)
    if not ok:
        return rows[:0], np.empty((5, 0), np.float64), np.empty(0, np.int8), False
    sig = np.empty((5, m), np.float64)
    ws, wt, wc, wr = params[P_WS], params[P_WT], params[P_WC], params[P_WR]
    wsum = ws + wt + wc + wr
    floor = params[P_C_FLOOR]
    for i in range(m):
        r = rows[i]
        # temporal (scoring.temporal_signal)
        if params[P_T_VALIDITY] > 0:
            end = min(floats[r, VTO], _ended(floats, r, t))
            since = max(t - end, 0.0) / DAY
            tv = 1.0 if t < end else np.exp2(-since / params[P_T_HALF])
            temporal = tv if floats[r, VFROM] <= t else params[P_T_OUTSIDE]
        else:
            age = max(t - floats[r, CREATED], 0.0) / DAY
            inside = floats[r, VFROM] <= t and t < floats[r, VTO]
            temporal = np.exp2(-age / params[P_T_HALF]) if inside else params[P_T_OUTSIDE]
        # confidence (ConfidenceEngine.compute; age as in store.confidence_at)
        if params[P_C_VALIDITY] > 0:
            end = min(floats[r, VTO], _ended(floats, r, t))
            cage = max(t - end, 0.0) / DAY
        else:
            cage = (t - floats[r, CREATED]) / DAY
        decay = max(floats[r, BASE] * np.exp2(-max(cage, 0.0) / params[P_C_HALF]), floor)
        boost = min(params[P_C_ACC_CAP], params[P_C_ACC_R] * np.log1p(max(tot[2, i], 0.0)))
        c = decay + params[P_C_POS] * tot[0, i] - params[P_C_NEG] * tot[1, i] + boost - tot[3, i]
        conf = min(max(c, floor), 1.0)
        # relational (scoring.relational_signal)
        e = float(edges[i]) if edges.shape[0] else float(ints[r, NREL])
        rel = min(params[P_R_CAP], params[P_R_SCALE] * np.log1p(max(e, 0.0)))
        s = sem[i]
        sig[0, i] = (ws * s + wt * temporal + wc * conf + wr * rel) / wsum
        sig[1, i] = s
        sig[2, i] = temporal
        sig[3, i] = conf
        sig[4, i] = rel
    order = _rank_order(sig[0], rows)
    out_rows = np.empty(m, np.int64)
    out_sig = np.empty((5, m), np.float64)
    status = np.empty(m, np.int8)
    for j in range(m):
        i = order[j]
        r = rows[i]
        out_rows[j] = r
        for f in range(5):
            out_sig[f, j] = sig[f, i]
        # status_at: UNCONSOLIDATED 0, ACTIVE 1, DORMANT 2, DEPRECATED 3, ARCHIVED 4
        st = 0
        if floats[r, CONS] <= t:
            st = 1
        if floats[r, DORM] <= t:
            st = 2
        if floats[r, SUP] <= t:
            st = 3
        if floats[r, ARCH] <= t:
            st = 4
        if not floats[r, CREATED] <= t:
            st = -1
        status[j] = st
    return out_rows, out_sig, status, True


@njit(cache=True)
def log_count(row, at, which, amount, head, values, links, n):
    """Append one counting event of ``row`` to the count log (:mod:`smartvector.countlog`):
    total ``which`` grows by ``amount``; a row whose events arrive out of time order is
    marked -2 instead. ``links`` holds each event's previous event of its row (row 0), a jump
    pointer further back (row 1) and its depth in the row's chain (row 2): the jump pointers
    (Myers' skew-binary scheme) make the search for "the last event at or before t" take
    O(log n) steps on a chain of n events. Room for the event is reserved by the caller;
    returns the new length."""
    k = head[row]
    if k == -2:
        return n
    if k >= 0 and at < values[4, k]:
        head[row] = -2
        return n
    for f in range(4):
        values[f, n] = values[f, k] if k >= 0 else 0.0
    values[which, n] += amount
    values[4, n] = at
    links[0, n] = k
    if k < 0:
        links[1, n] = -1
        links[2, n] = 0
    else:
        j = links[1, k]
        jj = links[1, j] if j >= 0 else -1
        depth_j = links[2, j] if j >= 0 else -1
        depth_jj = links[2, jj] if jj >= 0 else -1
        links[1, n] = jj if links[2, k] - depth_j == depth_j - depth_jj else k
        links[2, n] = links[2, k] + 1
    head[row] = n
    return n + 1


@njit(cache=True)
def log_counts(rows, at, which, amounts, head, values, links, n, start):
    """:func:`log_count` of ``(rows[i], at, which, amounts[i])`` for ``i`` from ``start`` on,
    one after another, while there is room: it stops before the first event whose row is
    beyond ``head`` or that finds the log full (where one ``CountLog.add`` after another
    would grow the arrays first). Returns ``(i, n)``: the next event and the new length."""
    cap = links.shape[1]
    for i in range(start, rows.shape[0]):
        if rows[i] >= head.shape[0] or n + 1 > cap:
            return i, n
        n = log_count(rows[i], at, which, amounts[i], head, values, links, n)
    return rows.shape[0], n


@njit(cache=True)
def record_access(rows, t, n, floats, ints, head, log_values, log_links, log_n):
    """Count one access of each row at ``t``, in the columns and the count log (room for
    one event per row reserved by the caller, and ``head`` covering every row); returns the
    log's new length, or -1 (nothing changed) if a row is not in ``[0, n)``."""
    for i in range(rows.shape[0]):
        if rows[i] < 0 or rows[i] >= n:
            return -1
    for i in range(rows.shape[0]):
        r = rows[i]
        log_n = log_count(r, t, 2, 1.0, head, log_values, log_links, log_n)
        ints[r, ACC] += 1
        floats[r, LAST_ACCESSED] = t
        if t > floats[r, LAST_EVENT]:
            floats[r, LAST_EVENT] = t
    return log_n


@njit(cache=True)
def relational_edges_at(rows, t, floats, ints, edge_head, edge_time, edge_prev):
    """Relational edges of each row made by ``t`` (``store.relational_edges_at``): the
    column for rows whose edges last changed by ``t``, else a count along the row's chain
    of edge times (:attr:`smartvector.graph.EdgeGraph.relational_times`)."""
    m = rows.shape[0]
    out = np.empty(m, np.int64)
    for i in range(m):
        r = rows[i]
        if floats[r, EDGES_CHANGED] <= t:
            out[i] = ints[r, NREL]
            continue
        c = 0
        k = edge_head[r] if r < edge_head.shape[0] else -1
        while k >= 0:
            if edge_time[k] <= t:
                c += 1
            k = edge_prev[k]
        out[i] = c
    return out


@njit(cache=True)
def search_one(query, labels, sims, from_distance, t, floats, ints, lifecycle, n, seen_all,
               params, head, log_values, log_links, access_k, n_rows, log_n, edge_head,
               edge_time, edge_prev):
    """:func:`first_visible`, :func:`rank` and :func:`record_access` (of the best
    ``access_k``) in one call, for the common case. Returns a code, the ranked pool (its
    rows, signals and statuses), the log's new length and the number of visible rows
    fetched: code 0 done; 1 too few visible rows fetched (and ``seen_all`` False: widen the
    search); 2 a row's count log is out of order (rank in Python); -1/-2 an unusable query
    (zero / non-finite). Nothing changes unless the code is 0. Rows whose edges changed after ``t``
    count them along the graph's chains of edge times (``edge_*``,
    :func:`relational_edges_at`)."""
    rows, sem, kept, late_ev, late_ed = first_visible(query, labels, sims, from_distance, t,
                                                      floats, lifecycle, n)
    no_rows = rows[:0]
    no_sig = np.empty((5, 0), np.float64)
    no_status = np.empty(0, np.int8)
    if kept < 0:
        return kept, no_rows, no_sig, no_status, log_n, 0
    if kept < n and not seen_all:
        return 1, no_rows, no_sig, no_status, log_n, kept
    edges = (relational_edges_at(rows, t, floats, ints, edge_head, edge_time, edge_prev)
             if late_ed else np.empty(0, np.int64))
    ranked, sig, status, ok = rank(rows, sem, t, floats, ints, np.empty((4, 0), np.float64),
                                   edges, params, head, log_values, log_links)
    if not ok:
        return 2, no_rows, no_sig, no_status, log_n, kept
    if access_k > 0:
        log_n = record_access(ranked[:access_k], t, n_rows, floats, ints, head, log_values,
                              log_links, log_n)
    return 0, ranked, sig, status, log_n, kept


def pack_params(temporal, confidence, relational, weights) -> np.ndarray:
    """The store's scoring parameters as the float64 vector the kernels read."""
    w = np.asarray(weights.as_tuple(), dtype=np.float64)
    ws, wt, wc, wr = (w / w.max()).tolist()
    p = np.empty(N_PARAMS, np.float64)
    p[P_T_VALIDITY] = temporal.anchor == "validity"
    p[P_T_HALF] = temporal.half_life_days
    p[P_T_OUTSIDE] = temporal.outside_window
    p[P_C_VALIDITY] = confidence.anchor == "validity"
    p[P_C_HALF] = confidence.half_life_days
    p[P_C_FLOOR] = confidence.floor
    p[P_C_POS] = confidence.positive_boost
    p[P_C_NEG] = confidence.negative_penalty
    p[P_C_ACC_R] = confidence.access_reinforcement
    p[P_C_ACC_CAP] = confidence.access_cap
    p[P_R_SCALE] = relational.scale
    p[P_R_CAP] = relational.cap
    p[P_WS], p[P_WT], p[P_WC], p[P_WR] = ws, wt, wc, wr
    return p

