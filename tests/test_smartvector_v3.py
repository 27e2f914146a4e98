"""SmartVector v3 (``experiments/methods/smartvector_v3.py``): with no time or confidence
weight it is the hybrid over the chunks in force; its time and confidence signals act inside
a subject only (never between two documents that do not restate each other); a newer
document that restates an older one wins; its parameters are checked. Its selection script
refuses test data."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from experiments.data.dataset import DocVersion
from experiments.methods import Context, QueryInput, make_params, make_retriever
from experiments.studies import select_v3
from smartvector import HashingEmbedder, StoreConfig

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def build(name: str, node: dict, versions: list[DocVersion], emb: HashingEmbedder):
    r = make_retriever(name, node, Context(emb, StoreConfig()))
    for v in sorted(versions, key=lambda v: v.ts):
        r.ingest(v)
        r.consolidate(v.ts + 3600)
    return r


def ask(r, emb, text: str, at: float):
    return r.search(QueryInput("q", text, emb.encode([text])[0], at), at, 5)


CORPUS = [
    DocVersion("refunds", 1, "Refunds are accepted within 30 days of delivery for all orders.",
               day(0), day(50)),
    DocVersion("refunds", 2, "Refunds are accepted within 14 days of delivery for all orders.",
               day(50)),
    DocVersion("shipping", 1, "Orders ship within 2 business days from our warehouse.", day(10)),
    DocVersion("returns-faq", 1, "Return shipping labels are free for defective items only.",
               day(90)),
]


def test_without_time_or_confidence_weights_it_is_the_hybrid() -> None:
    emb = HashingEmbedder(dim=256)
    v3 = build("v3", {"kind": "smartvector_v3"}, CORPUS, emb)
    node = OmegaConf.to_container(OmegaConf.load(ROOT / "conf/methods/hybrid_rrf.yaml"))
    hybrid = build("hybrid_rrf", node["hybrid_rrf"], CORPUS, emb)
    for text in ("how many days to get a refund", "when do orders ship", "return labels"):
        at = day(100).timestamp()
        a, b = ask(v3, emb, text, at), ask(hybrid, emb, text, at)
        assert [h.vector_id for h in a.hits] == [h.vector_id for h in b.hits]


def test_time_and_confidence_never_move_one_subject_against_another() -> None:
    emb = HashingEmbedder(dim=256)
    plain = build("a", {"kind": "smartvector_v3"}, CORPUS, emb)
    timed = build("b", {"kind": "smartvector_v3", "w_temporal": 5.0, "w_confidence": 5.0},
                  CORPUS, emb)
    at = day(100).timestamp()
    for text in ("refund days for orders", "free return shipping labels", "ship orders"):
        a, b = ask(plain, emb, text, at), ask(timed, emb, text, at)
        assert [h.doc_id for h in a.hits] == [h.doc_id for h in b.hits]  # one chunk each
        assert [h.score for h in a.hits] == pytest.approx([h.score for h in b.hits])


def test_a_newer_document_restating_an_older_one_wins_within_its_subject() -> None:
    emb = HashingEmbedder(dim=256)
    old = "The expense approval limit for managers is 500 dollars per purchase request."
    new = "The expense approval limit for managers is 900 dollars per purchase request."
    corpus = [DocVersion("expenses-2024", 1, old, day(0)),
              DocVersion("expenses-2025", 1, new, day(200))]  # no windows: both in force
    node = {"kind": "smartvector_v3", "w_lexical": 0.0, "subject_similarity": 0.8}
    without = build("a", node, corpus, emb)
    timed = build("b", {**node, "w_temporal": 1.0}, corpus, emb)
    assert timed.store.graph.neighbours("contradicts", 0), "the store found no contradiction"
    at = day(220).timestamp()
    text = "What is the expense approval limit for managers per purchase request?"
    assert ask(timed, emb, text, at).hits[0].doc_id == "expenses-2025"
    strict = build("c", {**node, "w_temporal": 1.0, "subject_similarity": 1.01}, corpus, emb)
    assert ([h.score for h in ask(strict, emb, text, at).hits]
            == pytest.approx([h.score for h in ask(without, emb, text, at).hits]))


@pytest.mark.parametrize(("key", "value"), [("w_temporal", -1.0), ("depth", 0),
                                            ("half_life_days", 0.0), ("rrf_k", -1),
                                            ("subject_similarity", -0.5)])
def test_bad_parameters_are_one_line_errors(key: str, value: float) -> None:
    with pytest.raises(ValueError, match=rf"methods\.v3: .*{key}") as err:
        make_params("v3", {"kind": "smartvector_v3", key: value})
    assert "\n" not in str(err.value)


def test_the_frozen_config_loads() -> None:
    node = OmegaConf.to_container(OmegaConf.load(ROOT / "conf/methods/smartvector_v3.yaml"))
    make_params("smartvector_v3", node["smartvector_v3"])


@pytest.mark.parametrize("seeds", [(20,), (100, 39), (0,)])
def test_the_selection_refuses_test_seeds(seeds: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="test seed"):
        select_v3.check_development(seeds)
    assert select_v3.main(["--seeds", ",".join(map(str, seeds))]) == 2


def test_the_selection_refuses_test_facts_and_splits() -> None:
    with pytest.raises(ValueError, match="development facts"):
        select_v3.check_development((100,), facts="test")
    with pytest.raises(ValueError, match="development splits"):
        select_v3.check_development((100,), split="test")


def test_the_selection_builds_development_data_only(tmp_path: Path, monkeypatch) -> None:
    built = []
    kind = select_v3.get_kind("policy_synth")

    def materialise(cfg, out, base):
        built.append(cfg)
        raise StopIteration  # only the first config is needed

    monkeypatch.setattr(select_v3, "get_kind",
                        lambda name: dataclasses.replace(kind, materialise=materialise))
    with pytest.raises(StopIteration):
        select_v3.development_cells((100,), tmp_path)
    assert built[0].facts == "dev" and built[0].seed == 100
