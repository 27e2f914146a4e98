"""Synthetic knowledge bases at scale, with realistic embedding structure, for the benchmarks.

Embeddings are *not* isotropic noise (on which graph indexes fail and which no text model
produces). They are a mixture on the unit sphere: every vector shares a common direction (text
embeddings are anisotropic: unrelated sentences have cosine ~0.05-0.15 under MiniLM), topics are
grouped into domains, and each topic spreads along its own few directions with decaying scales
(anisotropic clusters) plus a little isotropic noise. Topic sizes follow a Zipf law. A document
also touches a second topic (of its domain, or any topic 30% of the time): each chunk's centre
lies between the two (a uniform share of up to half), as real chunks mix subjects; without that
bridge every topic is an
island and HNSW's greedy search lands in the wrong island for some queries (it still does for
a few). The spreads were calibrated on all-MiniLM-L6-v2 embeddings of this module's own texts:
over the 7,000 version-1 chunks of a 10^4 corpus, the local intrinsic dimensionality (MLE over
20 neighbours) is 9.8 here vs 10.3 for MiniLM; nearest neighbours are less similar here (mean
cosine to the 1st / 10th: 0.83 / 0.73 vs 0.92 / 0.84), which makes the search harder, not
easier; unrelated pairs have cosine ~0.13 (MiniLM: ~0.55 on these templated texts, ~0.1 on
varied text). ``bench_query`` reports such statistics, and the ANN recall on the real model.

A knowledge base is a set of documents (1 to 30 chunks, mean ~8), each on one main topic, from a
mix of source types (so authorities differ), created over ``days`` days and ingested in time
slices through :meth:`SmartVectorStore.add_vectors`. Chunks are edited later (surgical updates
through the same call) so that ``superseded`` of all final vectors are superseded; an edited
chunk's vector stays close to the old one (cosine ~0.9) and its text states another number.
Some documents depend on an earlier document of their topic. Most texts state a quantity
("every 45 days"): one value per topic, another in a few chunks, and a changed one in a fifth
of the edited chunks (the others change wording), so consolidation finds some contradictions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from smartvector import HnswIndex, SmartVectorStore, StoreConfig
from smartvector.timeutil import DAY

DIM = 384
T0 = 1_704_067_200.0  # 2024-01-01 UTC, day 0 of every timeline

SOURCES = ["policy_doc", "wiki", "technical_doc", "email", "meeting_notes", "slack",
           "official_db"]
SOURCE_P = [0.25, 0.25, 0.15, 0.12, 0.10, 0.08, 0.05]

_ADJ = ("annual quarterly remote shared regional internal external mobile legacy primary "
        "secondary backup critical customer vendor partner payroll travel security network "
        "cloud laptop badge visitor contractor finance audit privacy incident release").split()
_NOUN = ("password access expense storage laptop server badge invoice contract ticket "
         "backup account report device license review budget training vacation request "
         "token firewall database dataset patch meeting archive retention escalation").split()
_THING = ("policy standard procedure guideline handbook runbook checklist rulebook charter "
          "playbook manual").split()
_SUBJ = ("the owner", "every manager", "the on-call engineer", "each employee", "the auditor",
         "the data steward", "the service desk", "the security lead", "the team lead",
         "the finance officer")
_ACT = ("reviewed", "rotated", "approved", "renewed", "audited", "backed up", "reported",
        "re-certified", "tested", "archived")
_UNIT = ("days", "hours", "weeks", "months")
_FILLER = (
    "Exceptions are recorded in the register together with the reason and an expiry date.",
    "Questions about this section go to the owning team through the usual service channel.",
    "The section applies to permanent staff, contractors and temporary accounts alike.",
    "Evidence of compliance is kept so that an audit can trace every decision made.",
    "Where a local rule is stricter than this section, the local rule takes precedence.",
    "Automated reminders are sent ahead of each deadline to whoever is responsible.",
)
_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"


def topic_name(t: int) -> str:
    a, b, c = t % len(_ADJ), (t // len(_ADJ)) % len(_NOUN), t // (len(_ADJ) * len(_NOUN))
    return f"{_ADJ[a]} {_NOUN[b]} {_THING[c % len(_THING)]}" + ("" if c < len(_THING) else
                                                                f" part {_LETTERS[c % 24]}")


class TopicModel:
    """Clustered unit vectors: topics grouped into domains, anisotropic spread per topic."""

    def __init__(self, n_topics: int, dim: int = DIM, seed: int = 0, rank: int = 12,
                 spread: float = 0.4, iso: float = 0.017, pool: int = 4096) -> None:
        rng = np.random.default_rng(seed)
        n_dom = max(8, int(np.sqrt(n_topics)))
        mean = _unit(rng.standard_normal(dim))
        dom = _unit(rng.standard_normal((n_dom, dim)))
        own = _unit(rng.standard_normal((n_topics, dim)))
        self.domain = rng.integers(0, n_dom, n_topics)
        self.centers = _unit(0.35 * mean + 0.55 * dom[self.domain] + 0.75 * own).astype(
            np.float32)
        self.pool = _unit(rng.standard_normal((pool, dim))).astype(np.float32)
        self.basis = rng.integers(0, pool, (n_topics, rank))
        self.scales = (spread * 0.8 ** np.arange(rank)).astype(np.float32)
        self.iso = iso
        self.dim = dim

    @property
    def n_topics(self) -> int:
        return len(self.centers)

    def _noise(self, topics: np.ndarray, rng: np.random.Generator, scale: float) -> np.ndarray:
        z = rng.standard_normal((len(topics), len(self.scales))).astype(np.float32) * self.scales
        x = np.einsum("mr,mrd->md", z, self.pool[self.basis[topics]])
        x += self.iso * rng.standard_normal((len(topics), self.dim)).astype(np.float32)
        return scale * x

    def related(self, topics: np.ndarray, rng: np.random.Generator,
                cross: float = 0.3) -> np.ndarray:
        """A second topic for each of ``topics``: one of the same domain, or with probability
        ``cross`` any topic (texts bridge domains too)."""
        order = np.argsort(self.domain, kind="stable")
        start = np.searchsorted(self.domain[order], self.domain[topics], side="left")
        end = np.searchsorted(self.domain[order], self.domain[topics], side="right")
        out = order[start + (rng.random(len(topics)) * (end - start)).astype(np.int64)]
        anywhere = rng.random(len(topics)) < cross
        out[anywhere] = rng.integers(0, self.n_topics, int(anywhere.sum()))
        return out

    def sample(self, topics: np.ndarray, rng: np.random.Generator, scale: float = 1.0,
               second: np.ndarray | None = None, weight: np.ndarray | None = None
               ) -> np.ndarray:
        """One unit vector per entry of ``topics``; with ``second`` topics and ``weight``
        (in [0, 1]), centred between the two topics (a text touching both)."""
        out = np.empty((len(topics), self.dim), dtype=np.float32)
        for s in range(0, len(topics), 32768):
            t = topics[s:s + 32768]
            centre = self.centers[t]
            if second is not None:
                w = weight[s:s + 32768, None].astype(np.float32)
                centre = (1 - w) * centre + w * self.centers[second[s:s + 32768]]
            out[s:s + len(t)] = _unit(centre + self._noise(t, rng, scale))
        return out

    def edit(self, x: np.ndarray, topics: np.ndarray, rng: np.random.Generator,
             amount: float = 0.3) -> np.ndarray:
        """Vectors of edited chunks: close to ``x`` (cosine ~0.9), same topic."""
        out = np.empty_like(x)
        for s in range(0, len(x), 32768):
            t = topics[s:s + 32768]
            out[s:s + len(t)] = _unit(x[s:s + len(t)] + self._noise(t, rng, amount))
        return out


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@dataclass
class Corpus:
    """A generated knowledge base: documents, their chunks and their edits, in time order."""

    n: int
    seed: int
    days: float
    model: TopicModel
    # per document
    doc_topic: np.ndarray
    doc_day: np.ndarray          # ingestion day of version 1
    doc_source: list[str]
    doc_start: np.ndarray        # first chunk of each document in the chunk arrays
    doc_size: np.ndarray
    doc_update_day: np.ndarray   # day of version 2 (inf: never edited)
    depends_on: dict[str, list[str]]
    # per version-1 chunk
    texts: list[str]
    emb: np.ndarray
    edited: np.ndarray           # chunk is replaced in version 2
    edit_texts: dict[int, str]
    edit_emb: np.ndarray         # rows follow np.flatnonzero(edited)
    slices: list[tuple[float, np.ndarray, np.ndarray]] = field(default_factory=list)

    def doc_id(self, d: int) -> str:
        return f"kb{d:07d}"

    @property
    def n_vectors(self) -> int:
        return len(self.texts) + int(self.edited.sum())


def _text(topic: int, j: int, quantity: int | None, unit: str, rng_vals: tuple[int, ...]) -> str:
    s, a, f1, f2 = rng_vals
    head = f"{topic_name(topic).capitalize()}, section {_LETTERS[j % 24]}{_LETTERS[j // 24 % 24]}: "
    if quantity is None:
        body = (f"{_SUBJ[s]} keeps the {_NOUN[topic % len(_NOUN)]} records up to date and "
                f"answers questions about them.")
    else:
        body = f"{_SUBJ[s]} must make sure it is {_ACT[a]} every {quantity} {unit}."
    return f"{head}{body} {_FILLER[f1]} {_FILLER[f2]}"


def make_corpus(n: int, seed: int = 0, days: float = 360.0, superseded: float = 0.3,
                mean_chunks: float = 8.0, depend_frac: float = 0.1,
                quantity_frac: float = 0.6, odd_frac: float = 0.02,
                value_edit_frac: float = 0.2, max_mix: float = 0.5) -> Corpus:
    """A knowledge base whose final store holds about ``n`` vectors, ``superseded`` of them
    superseded by later versions."""
    rng = np.random.default_rng(seed)
    v1 = int(round(n * (1 - superseded)))
    n_topics = max(50, n // 100)
    model = TopicModel(n_topics, seed=seed)
    pop = 1.0 / np.arange(1, n_topics + 1) ** 0.7
    pop /= pop.sum()
    sizes = []
    total = 0
    while total < v1:
        s = int(min(30, 1 + rng.poisson(mean_chunks - 1)))
        s = min(s, v1 - total)
        sizes.append(s)
        total += s
    doc_size = np.array(sizes, dtype=np.int64)
    n_docs = len(doc_size)
    doc_start = np.cumsum(doc_size) - doc_size
    doc_topic = rng.choice(n_topics, n_docs, p=pop)
    doc_day = np.sort(rng.uniform(0, 0.8 * days, n_docs))
    doc_source = [SOURCES[i] for i in rng.choice(len(SOURCES), n_docs, p=SOURCE_P)]
    chunk_doc = np.repeat(np.arange(n_docs), doc_size)
    chunk_topic = doc_topic[chunk_doc]
    # each document also touches a related topic (same domain), each chunk to its own degree
    doc_second = model.related(doc_topic, rng)
    emb = model.sample(chunk_topic, rng, second=doc_second[chunk_doc],
                       weight=rng.uniform(0, max_mix, v1))
    # quantities: one value per topic, and another in ``odd_frac`` of the chunks, so that
    # some same-topic chunks of different documents disagree (contradiction candidates)
    other = rng.random(v1) < odd_frac
    qty = (5 + 5 * (chunk_topic % 9) + 15 * other * rng.integers(1, 3, v1)).tolist()
    has_q = (rng.random(v1) < quantity_frac).tolist()
    unit = rng.integers(0, len(_UNIT), n_topics)[chunk_topic].tolist()
    pick = np.stack([rng.integers(0, len(_SUBJ), v1), rng.integers(0, len(_ACT), v1),
                     rng.integers(0, len(_FILLER), v1), rng.integers(0, len(_FILLER), v1)],
                    axis=1).tolist()
    j_in_doc = (np.arange(v1) - doc_start[chunk_doc]).tolist()
    topics_l = chunk_topic.tolist()
    texts = [_text(topics_l[i], j_in_doc[i], qty[i] if has_q[i] else None, _UNIT[unit[i]],
                   tuple(pick[i])) for i in range(v1)]
    # edits: exactly round(n * superseded) chunks, in documents created early enough
    n_edit = n - v1
    editable = np.flatnonzero(doc_day[chunk_doc] < 0.75 * days)
    edited = np.zeros(v1, dtype=bool)
    edited[rng.choice(editable, min(n_edit, len(editable)), replace=False)] = True
    upd = np.full(n_docs, np.inf)
    has_edit = np.bincount(chunk_doc[edited], minlength=n_docs) > 0
    upd[has_edit] = np.minimum(days, doc_day[has_edit] + rng.uniform(7, 0.5 * days,
                                                                    int(has_edit.sum())))
    ei = np.flatnonzero(edited)
    edit_emb = model.edit(emb[ei], chunk_topic[ei], rng)
    edit_texts = {}
    new_value = (rng.random(len(ei)) < value_edit_frac).tolist()
    for i, nv in zip(ei.tolist(), new_value, strict=True):
        t = texts[i]
        if nv and " every " in t:
            q = qty[i] + 5 * int(rng.integers(1, 4))
            head, rest = t.split(" every ", 1)
            edit_texts[i] = f"{head} every {q} {rest.split(' ', 1)[1]}"
        else:
            edit_texts[i] = t.replace(" must ", " shall ", 1).replace(" keeps ", " holds ", 1)
    # dependencies: on the previous document of the same topic
    depends_on: dict[str, list[str]] = {}
    order = np.lexsort((doc_day, doc_topic))
    deps = rng.random(n_docs) < depend_frac
    for a, b in zip(order[:-1].tolist(), order[1:].tolist(), strict=True):
        if doc_topic[a] == doc_topic[b] and deps[b]:
            depends_on[f"kb{b:07d}"] = [f"kb{a:07d}"]
    corpus = Corpus(n, seed, days, model, doc_topic, doc_day, doc_source, doc_start, doc_size,
                    upd, depends_on, texts, emb, edited, edit_texts, edit_emb)
    corpus.slices = _slices(corpus)
    return corpus


def _slices(c: Corpus, per_slice_days: float = 15.0) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """(day, new documents, updated documents) per ingestion slice, in time order."""
    edges = np.arange(per_slice_days, c.days + per_slice_days, per_slice_days)
    new_bin = np.searchsorted(edges, c.doc_day, side="left")
    upd_ok = np.isfinite(c.doc_update_day)
    upd_bin = np.searchsorted(edges, np.where(upd_ok, c.doc_update_day, 0), side="left")
    # an update falling in its document's own slice moves to the next one
    upd_bin = np.minimum(np.maximum(upd_bin, new_bin + 1), len(edges) - 1)
    out = []
    for b, day in enumerate(edges.tolist()):
        new = np.flatnonzero(new_bin == b)
        upd = np.flatnonzero(upd_ok & (upd_bin == b))
        if len(new) or len(upd):
            out.append((day, new, upd))
    return out


@dataclass
class Built:
    store: SmartVectorStore
    ingest_s: float
    consolidate_s: list[float]
    reports: list


def new_store(dim: int = DIM, threads: int = 2, ef_construction: int = 200,
              capacity: int = 1024) -> SmartVectorStore:
    """An empty store on an hnswlib index (M=16, ``ef_construction``, ``threads`` threads)."""
    from smartvector import HashingEmbedder

    index = HnswIndex(dim, M=16, ef_construction=ef_construction, num_threads=threads,
                      initial_capacity=capacity)
    return SmartVectorStore(HashingEmbedder(dim), index, StoreConfig())


def ingest(c: Corpus, store: SmartVectorStore, after: float = -np.inf,
           until: float = np.inf) -> None:
    """Replay the corpus's slices of days in (``after``, ``until``] through add_vectors."""
    ei = {int(i): k for k, i in enumerate(np.flatnonzero(c.edited).tolist())}
    for day, new, upd in c.slices:
        if not after < day <= until:
            continue
        texts: list[str] = []
        doc_ids: list[str] = []
        sources: list[str | None] = []
        rows: list[np.ndarray] = []
        for d in new.tolist():
            s, e = int(c.doc_start[d]), int(c.doc_start[d] + c.doc_size[d])
            texts.extend(c.texts[s:e])
            doc_ids.extend([c.doc_id(d)] * (e - s))
            sources.extend([c.doc_source[d]] * (e - s))
            rows.append(c.emb[s:e])
        for d in upd.tolist():
            s, e = int(c.doc_start[d]), int(c.doc_start[d] + c.doc_size[d])
            for i in range(s, e):
                if c.edited[i]:
                    texts.append(c.edit_texts[i])
                    rows.append(c.edit_emb[ei[i]][None])
                else:
                    texts.append(c.texts[i])
                    rows.append(c.emb[i][None])
            doc_ids.extend([c.doc_id(d)] * (e - s))
            sources.extend([None] * (e - s))
        store.add_vectors(np.concatenate(rows), texts, doc_ids, T0 + day * DAY,
                          source_type=sources, depends_on=c.depends_on)


def build(c: Corpus, threads: int = 2, consolidate_at: tuple[float, ...] = (),
          ef_construction: int = 200, log=print) -> Built:
    """Ingest the corpus, consolidating at the given days (each pass after the slices up to
    that day); returns the store and the wall times."""
    store = new_store(threads=threads, ef_construction=ef_construction)
    t_ing = 0.0
    t_cons = []
    reports = []
    done = -np.inf
    for day in list(consolidate_at) + [np.inf]:
        t = time.perf_counter()
        ingest(c, store, done, day)
        t_ing += time.perf_counter() - t
        if np.isfinite(day):
            t = time.perf_counter()
            reports.append(store.consolidate(T0 + day * DAY))
            t_cons.append(time.perf_counter() - t)
            log(f"    consolidated at day {day:.0f}: {t_cons[-1]:.1f} s "
                f"({reports[-1].promoted} promoted, {reports[-1].dormant} dormant, "
                f"{reports[-1].contradictions} contradictions)")
        done = day
    return Built(store, t_ing, t_cons, reports)


def queries(c: Corpus, m: int, seed: int = 1, now_frac: float = 0.5
            ) -> tuple[np.ndarray, np.ndarray]:
    """``m`` query vectors (topics drawn like the documents) and their reference times:
    ``now_frac`` at the end of the timeline, the rest time travel to a uniform earlier day."""
    rng = np.random.default_rng(seed + 10_000)
    topics = rng.choice(c.doc_topic, m)
    q = c.model.sample(topics, rng, scale=1.2, second=c.model.related(topics, rng),
                       weight=rng.uniform(0, 0.5, m))
    days = np.where(rng.random(m) < now_frac, c.days + 1, rng.uniform(0.15 * c.days, c.days, m))
    return q, T0 + days * DAY
