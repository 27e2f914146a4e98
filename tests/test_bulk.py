"""Bulk ingestion (add_vectors, add_document(embeddings=)): the same store as one add_document
per document, validation before any change, and a store that queries, consolidates, saves."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from smartvector import HashingEmbedder, SmartVectorStore
from smartvector.chunking import chunk_text
from smartvector.timeutil import DAY

T0 = 1_700_000_000.0

TOPICS = ["password rotation", "remote access", "disk encryption", "incident reporting",
          "visitor badges", "expense approval", "data retention"]


def paragraphs(doc: int, version: int, n: int, edited: set[int] = frozenset()) -> list[str]:
    """``n`` one-line paragraphs of document ``doc``; those in ``edited`` say other numbers."""
    out = []
    for j in range(n):
        days = 30 + 10 * ((doc + j) % 7) + (version * 5 if j in edited else 0)
        out.append(f"Rule {j} of policy {doc}: {TOPICS[(doc + j) % len(TOPICS)]} must be "
                   f"reviewed every {days} days by the owning team.")
    return out


class NoEmbedder:
    """An embedder that must not be called (precomputed embeddings are supplied)."""

    def __init__(self, dim: int) -> None:
        self.name, self.dim = "none", dim

    def encode(self, texts):
        raise AssertionError(f"embedder called on {len(texts)} texts")


def state(store: SmartVectorStore) -> dict:
    """Everything a store holds, comparable with ==."""
    cols = {k: v.tolist() for k, v in store.columns.to_arrays().items()}
    return {
        "columns": {k: [None if isinstance(x, float) and np.isnan(x) else x for x in v]
                    for k, v in cols.items()},
        "ids": store.ids, "row_of": store._row_of, "texts": store.texts,
        "doc_of": store.doc_of, "source_of": store.source_of, "meta_of": store.meta_of,
        "events": store.events,
        "docs": {d: dataclasses.asdict(s) for d, s in store.docs.items()},
        "pending_ripple": store.pending_ripple, "graph": store.graph.to_dict(),
        "vectors": store.index.get_vectors(np.arange(len(store))).tolist(),
    }


def batches():
    """Three calls' worth of documents: (time, [(doc_id, paragraphs, source, authority)])."""
    first = [(f"d{i}", paragraphs(i, 1, 1 + i % 4), "policy_doc" if i % 2 else "chat", None)
             for i in range(6)]
    second = [
        ("d1", paragraphs(1, 2, 2, {1}), None, None),           # one chunk edited
        ("d6", paragraphs(6, 1, 3), "wiki", 0.6),              # a new document in between
        ("d3", paragraphs(3, 2, 3, {0, 2}), None, None),        # two edited, one removed
        ("d7", paragraphs(7, 1, 2), "email", None),
        ("d8", paragraphs(8, 1, 1), None, None),
        ("d0", paragraphs(0, 2, 2, {0}), None, None),           # one edited, one added
    ]
    third = [("d3", paragraphs(3, 3, 3, {1}), "policy_doc", 0.95),
             ("d9", paragraphs(9, 1, 2), "policy_doc", None)]
    return [(T0, first), (T0 + 3 * DAY, second), (T0 + 9 * DAY, third)]


DEPENDS = {"d6": ["d1"], "d7": ["d3", "d6"], "d9": ["d0"]}


def build_one_by_one(emb: HashingEmbedder) -> SmartVectorStore:
    store = SmartVectorStore(emb, "exact")
    for t, docs in batches():
        for d, paras, st, auth in docs:
            store.add_document(d, "\n\n".join(paras), t, source_type=st, authority=auth,
                               depends_on=DEPENDS.get(d, ()))
    return store


def build_bulk(emb: HashingEmbedder, store: SmartVectorStore | None = None) -> SmartVectorStore:
    if store is None:
        store = SmartVectorStore(NoEmbedder(emb.dim), "exact")
    for t, docs in batches():
        texts = [p for _, paras, _, _ in docs for p in paras]
        doc_ids = [d for d, paras, _, _ in docs for _ in paras]
        st = [s for _, paras, s, _ in docs for _ in paras]
        auth = [a for _, paras, _, a in docs for _ in paras]
        store.add_vectors(emb.encode(texts), texts, doc_ids, t, source_type=st,
                          authority=auth, depends_on=DEPENDS)
    return store


def test_bulk_equals_one_add_document_per_document():
    emb = HashingEmbedder(dim=64)
    one, bulk = build_one_by_one(emb), build_bulk(emb)
    assert state(bulk) == state(one)
    assert len(bulk) > 20 and any(bulk.graph.neighbours("supersedes", r) for r in range(len(bulk)))
    # and they keep behaving the same: consolidation, queries, later surgical updates
    at = T0 + 10 * DAY
    r1, r2 = one.consolidate(at), bulk.consolidate(at)
    assert dataclasses.asdict(r1) == dataclasses.asdict(r2)
    q = emb.encode(["how often are passwords reviewed?"])[0]
    for t in (T0 + DAY, T0 + 5 * DAY, at):
        h1 = one.query(None, t, k=5, vector=q, record_access=False)
        h2 = bulk.query(None, t, k=5, vector=q, record_access=False)
        assert h1 == h2
    new = "\n\n".join(paragraphs(6, 2, 3, {2}))
    one.add_document("d6", new, at + DAY)
    new_emb = emb.encode([c.text for c in chunk_text(new)])
    bulk.add_document("d6", new, at + DAY, embeddings=new_emb)
    assert state(bulk) == state(one)


def test_bulk_documents_round_trip_through_save_and_load(tmp_path):
    emb = HashingEmbedder(dim=64)
    store = build_bulk(emb, SmartVectorStore(emb, "hnsw"))
    store.consolidate(T0 + 10 * DAY)
    loaded = SmartVectorStore.load(store.save(tmp_path / "s.npz"), emb)
    before, after = state(store), state(loaded)
    assert after == before
    for d, doc in loaded.docs.items():
        assert [store.texts[r] for r in doc.rows] == [c.text for c in doc.chunks]
        assert doc.chunks == store.docs[d].chunks


def test_hnsw_bulk_store_finds_what_the_exact_one_finds():
    emb = HashingEmbedder(dim=64)
    exact = build_bulk(emb)
    hnsw = build_bulk(emb, SmartVectorStore(NoEmbedder(64), "hnsw"))
    np.testing.assert_allclose(hnsw.index.get_vectors(np.arange(len(hnsw))),
                               exact.index.get_vectors(np.arange(len(exact))), atol=1e-6)
    q = emb.encode(["incident reporting review"])[0]
    ids = [h.vector_id for h in hnsw.query(None, T0 + 10 * DAY, k=3, vector=q)]
    assert ids == [h.vector_id for h in exact.query(None, T0 + 10 * DAY, k=3, vector=q)]


def test_add_document_with_embeddings_uses_only_the_new_chunks():
    emb = HashingEmbedder(dim=64)
    store = SmartVectorStore(NoEmbedder(64), "exact")
    paras = paragraphs(0, 1, 3)
    store.add_document("d", "\n\n".join(paras), T0, embeddings=emb.encode(paras))
    edited = paragraphs(0, 2, 3, {1})
    marked = emb.encode(edited)
    marked[0] = marked[2] = np.nan  # kept chunks: their rows must not be used
    rep = store.add_document("d", "\n\n".join(edited), T0 + DAY, embeddings=marked)
    assert rep.n_reembedded == 1 and rep.kept == 2
    np.testing.assert_allclose(store.index.get_vectors(np.array([3]))[0],
                               emb.encode([edited[1]])[0], atol=1e-6)
    with pytest.raises(ValueError, match="shape"):
        store.add_document("e", "one\n\ntwo", T0, embeddings=emb.encode(["one"]))
    with pytest.raises(AssertionError, match="embedder called"):
        store.add_document("e", "one\n\ntwo", T0)


@pytest.mark.parametrize("change, match", [
    (lambda a: a.update(doc_ids=["a", "b", "a"]), "contiguous"),
    (lambda a: a.update(texts=["x", "y\n\nz", "w"]), "not one chunk"),
    (lambda a: a.update(texts=["x", " y", "w"]), "not one chunk"),
    (lambda a: a.update(texts=["x", "", "w"]), "not one chunk"),
    (lambda a: a.update(texts=["x", "y" * 2000, "w"]), "not one chunk"),
    (lambda a: a["embeddings"].__setitem__(1, 0.0), "zero or not finite"),
    (lambda a: a["embeddings"].__setitem__((2, 0), np.inf), "zero or not finite"),
    (lambda a: a.update(embeddings=a["embeddings"][:2]), "shape"),
    (lambda a: a.update(doc_ids=["a", "a"]), "doc ids"),
    (lambda a: a.update(authority=[0.5, 0.6, 0.7]), "authority differ"),
    (lambda a: a.update(versions=[1, 2, 1]), "versions differ"),
    (lambda a: a.update(source_type=["wiki"]), "3 rows"),
    (lambda a: a.update(at=T0 - DAY), "time order"),
    (lambda a: a.update(valid_from=T0 + DAY, valid_to=T0), "valid_to"),
    (lambda a: a.update(doc_ids=["old", "old", "b"], versions=1), "exists already"),
])
def test_bad_bulk_input_changes_nothing(change, match):
    emb = HashingEmbedder(dim=64)
    store = SmartVectorStore(emb, "exact")
    store.add_document("old", "first\n\nsecond", T0)
    before = state(store)
    texts = ["x", "y", "w"]
    args = {"embeddings": emb.encode(texts), "texts": texts, "doc_ids": ["a", "a", "old"],
            "at": T0}
    change(args)
    with pytest.raises(ValueError, match=match):
        store.add_vectors(**args)
    assert state(store) == before


def test_bulk_defaults_and_explicit_versions():
    emb = HashingEmbedder(dim=64)
    store = SmartVectorStore(NoEmbedder(64), "exact")
    texts = ["alpha one", "alpha two", "beta"]
    reps = store.add_vectors(emb.encode(texts), texts, ["a", "a", "b"], T0, versions=[3, 3, 7],
                             meta={"src": "bulk"})
    assert [r.added for r in reps] == [["a@v3#0", "a@v3#1"], ["b@v7#0"]]
    assert store.document_text("a") == "alpha one\n\nalpha two"
    assert store.docs["a"].chunks == chunk_text("alpha one\n\nalpha two")
    v = store.get("a@v3#1")
    assert (v.source.type, v.source.authority, v.doc_version, v.meta) == ("unknown", 0.2, 3,
                                                                          {"src": "bulk"})
    assert [e.kind for e in store.history("a@v3#1")] == ["created"]
    assert store.add_vectors(np.empty((0, 64)), [], [], T0) == []
    assert len(store) == 3


# ------------------------------------------------- vectorised consolidation = the plain loops
def reference_consolidate(store: SmartVectorStore, t: float):
    """The consolidation pass written as plain per-row loops (the library's earlier code):
    the vectorised pass must leave the store exactly as this does."""
    from smartvector.consolidation import differ_in_claims, resolve
    from smartvector.vector import ConsolidationReport

    report = ConsolidationReport(at=t)
    c, params = store.columns, store.config.consolidation
    exists = c["created_at"] <= t
    live = exists & ~(c["superseded_at"] <= t)
    report.checked = int(live.sum())
    active = np.flatnonzero(live & (c["consolidated_at"] <= t) & ~(c["dormant_at"] <= t))
    if len(active):
        conf = store.confidence_at(active, t)
        for r, cf in zip(active[store.engine.is_dormant(conf)].tolist(),
                         conf[store.engine.is_dormant(conf)].tolist(), strict=True):
            c["dormant_at"][r] = t
            store.log(r, t, "dormant", detail=f"confidence {cf:.3f} below threshold")
            report.dormant += 1
    new = np.flatnonzero(exists & np.isinf(c["consolidated_at"]))
    new_live = new[live[new]]
    touched, sources = set(), []
    if len(new_live):
        k = min(2 * params.neighbours + 1, len(store.index))
        labels, sims = store.index.search(store.index.get_vectors(new_live), k)
        for a, labs, ss in zip(new_live.tolist(), labels, sims, strict=True):
            ok = live[labs] & (labs != a)
            for b, s in list(zip(labs[ok].tolist(), ss[ok].tolist(), strict=True))[
                    : params.neighbours]:
                if (s < params.contradiction_similarity or store.doc_of[a] == store.doc_of[b]
                        or b in store.graph.neighbours("contradicts", a)
                        or not differ_in_claims(store.texts[a], store.texts[b])):
                    continue
                winner, loser, why = resolve(store, a, b)
                c["lost_at"][loser] = min(c["lost_at"][loser], t)
                store.graph.link_contradicts(a, b, t)
                store.penalise(loser, params.contradiction_penalty, t, "contradiction",
                               f"lost to {store.ids[winner]} ({why})")
                sources.append(loser)
                report.contradictions += 1
                report.details.append(f"contradiction {store.ids[a]} ~ {store.ids[b]} "
                                      f"(cos {s:.2f}): kept {store.ids[winner]} ({why})")
    new_docs = {store.doc_of[r] for r in new.tolist()}
    for d in sorted(d for d, s in store.docs.items() if s.depends_on and (
            d in new_docs or new_docs.intersection(s.depends_on))):
        rows = [r for r in store.docs[d].rows if live[r]]
        for target in store.docs[d].depends_on:
            tdoc = store.docs.get(target)
            if tdoc is None or not rows:
                continue
            trows = [r for r in tdoc.rows if live[r]]
            if not trows:
                continue
            sims = store.index.get_vectors(np.array(rows)) @ store.index.get_vectors(
                np.array(trows)).T
            for i, r in enumerate(rows):
                if set(store.graph.neighbours("depends_on", r)).intersection(trows):
                    continue
                j = int(np.argmax(sims[i]))
                if sims[i, j] >= params.dependency_similarity and store.graph.link_dependency(
                        r, trows[j], t):
                    touched.update((r, trows[j]))
                    report.dependency_edges += 1
    store.refresh_edge_counts(touched, t)
    due = [r for r in store.pending_ripple if c["created_at"][r] <= t]
    store.pending_ripple = [r for r in store.pending_ripple if not c["created_at"][r] <= t]
    for src in due + sources:
        report.ripples += store.propagate(src, t)
    old = np.flatnonzero((c["superseded_at"] + params.archive_after_days * DAY <= t)
                         & np.isinf(c["archived_at"]))
    for r in old.tolist():
        c["archived_at"][r] = t
        store.log(r, t, "archived")
    report.archived = len(old)
    for r in new_live.tolist():
        c["consolidated_at"][r] = t
        store.log(r, t, "promoted")
    report.promoted = len(new_live)
    store.last_consolidated = t
    return report


def knowledge_base(seed: int):
    """(time, docs) batches: 40 documents on 7 topics stating review periods, edited later,
    some depending on others."""
    rng = np.random.default_rng(seed)
    out = []
    for b in range(4):
        docs = []
        for d in rng.choice(40, 12, replace=False).tolist():
            n = 1 + (d % 4)
            edited = set(rng.choice(n, rng.integers(0, n + 1), replace=False).tolist())
            docs.append((f"k{d}", paragraphs(d, b + 1, n, edited),
                         ["policy_doc", "chat", "wiki"][d % 3]))
        out.append((T0 + 20 * b * DAY, docs))
    return out


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_vectorised_consolidation_equals_the_plain_loops(index):
    emb = HashingEmbedder(dim=64)
    deps = {f"k{d}": [f"k{(d * 7) % 40}"] for d in range(0, 40, 3)}
    stores = [SmartVectorStore(emb, index) for _ in range(2)]
    for store, run in zip(stores, [lambda s, t: s.consolidate(t), reference_consolidate],
                          strict=True):
        for t, docs in knowledge_base(seed=1):
            for d, paras, st in docs:
                store.add_document(d, "\n\n".join(paras), t, source_type=st,
                                   depends_on=deps.get(d, ()))
            store.feedback(store.ids[len(store) // 2], False, t)
            rep = run(store, t + 0.5 * DAY)
            store.reports = [*getattr(store, "reports", []), dataclasses.asdict(rep)]
        store.reports.append(dataclasses.asdict(run(store, t + 90 * DAY)))
    fast, slow = stores
    assert fast.reports == slow.reports
    assert state(fast) == state(slow)
    totals = {k: sum(r[k] for r in fast.reports) for k in ("contradictions", "dependency_edges",
                                                           "ripples", "dormant", "archived")}
    assert all(totals.values()), totals  # every step did something


# ------------------------------------------------------- fast paragraph spans = the regex
def test_paragraph_spans_match_the_paragraph_regex():
    import random

    from smartvector.chunking import _PARAGRAPH, paragraph_spans

    pieces = ["a", "b", ".", " ", "\n", "\t", "\r", "\x0b", "\x0c", "\x1c", "\u2028", "\xa0",
              "\x85", "é", "\n\n", " \n ", "\n \n", "word ", "Sentence one. "]
    rng = random.Random(0)
    texts = ["", "x", "a\n\nbody text\n\nlast", "  lead\n\n\n  \n trail  \n", "é\n \nb.",
             "\n".join(["line"] * 5), "\n\n".join(["para " * 30] * 40)]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
              for _ in range(30000)]
    for text in texts:
        assert paragraph_spans(text) == [(m.start(), m.end()) for m in _PARAGRAPH.finditer(text)]


def test_bulk_refuses_a_version_that_exists_in_part():
    emb = HashingEmbedder(dim=64)
    store = SmartVectorStore(emb, "exact")
    store.add_document("d", "first\n\nsecond", T0)
    store.add_document("d", "first\n\nsecond, edited", T0 + DAY)  # only d@v2#1 is new
    assert "d@v2#0" not in store._row_of and "d@v2#1" in store._row_of
    before = state(store)
    texts = ["other", "words"]
    with pytest.raises(ValueError, match="version 2 exists already"):
        store.add_vectors(emb.encode(texts), texts, ["d", "d"], T0 + 2 * DAY, versions=2)
    assert state(store) == before
