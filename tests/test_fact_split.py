"""The fact bank's development and test halves: held-out corpora share no fact, and no
document, with development ones, whatever the seeds."""

from __future__ import annotations

import pytest

from experiments.data.policy_synth import (
    PolicySynthConfig,
    bank_facts,
    fact_split,
    generate,
    load_bank,
    validate,
)

SMALL = dict(n_topics=20, n_dependents=6, n_current_queries=40, n_as_of_queries=36,
             n_dependent_queries=13)


def _facts_and_docs(facts: str, seed: int) -> tuple[set[str], set[str]]:
    corpus, queries = generate(PolicySynthConfig(seed=seed, facts=facts, **SMALL))
    return {q["meta"]["topic"] for q in queries}, {r["doc_id"] for r in corpus}


def test_halves_partition_the_bank() -> None:
    keys = [f.key for f in load_bank().facts]
    dev, test = [f.key for f in bank_facts("dev")], [f.key for f in bank_facts("test")]
    assert sorted(dev + test) == sorted(keys) and not set(dev) & set(test)
    assert (len(dev), len(test)) == (21, 24)
    assert all(fact_split(k) == "dev" for k in dev)


def test_test_corpora_share_no_fact_or_document_with_development() -> None:
    dev_facts, dev_docs = set(), set()
    for seed in (100, 101):
        f, d = _facts_and_docs("dev", seed)
        dev_facts |= f
        dev_docs |= d
    for seed in (20, 21):
        f, d = _facts_and_docs("test", seed)
        assert f and not f & dev_facts
        assert not d & dev_docs


def test_too_many_topics_for_a_half_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"^n_topics must be <= 21 \(the fact bank's facts=dev"):
        validate(PolicySynthConfig(facts="dev"))
    with pytest.raises(ValueError, match=r"^facts must be one of all, dev, test"):
        validate(PolicySynthConfig(facts="half"))
