"""The synthetic versioned-policy corpus: sizes, determinism, and ground-truth soundness."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from functools import cache
from pathlib import Path

import pytest

from experiments.corpora.policy_synth import (
    FACTS,
    PolicySynthConfig,
    corpus_stats,
    count_vectors,
    generate,
    main,
    validate,
    write_policy_synth,
)
from experiments.dataset import load_dataset
from experiments.grading import contains_answer
from smartvector.chunking import chunk_text, diff_chunks

COMMITTED = Path(__file__).resolve().parents[1] / "datasets" / "policy_synth"


@cache
def _default() -> tuple[list[dict], list[dict]]:
    return generate(PolicySynthConfig())


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _versions(corpus: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for rec in corpus:
        out.setdefault(rec["doc_id"], []).append(rec)
    return out


def _valid_at(versions: list[dict], at: float) -> dict | None:
    for rec in versions:
        until = rec.get("valid_to")
        if _ts(rec["valid_from"]) <= at and (until is None or at < _ts(until)):
            return rec
    return None


def _topic_values(corpus: list[dict]) -> dict[str, set[str]]:
    """Every value a topic's genuine (non-injected) documents ever state."""
    out: dict[str, set[str]] = {}
    for rec in corpus:
        if rec["meta"].get("injected") is not True:
            out.setdefault(rec["meta"]["topic"], set()).add(rec["meta"]["value"])
    return out


# --- determinism and size -----------------------------------------------------------------


def test_same_seed_gives_identical_files(tmp_path):
    cfg = PolicySynthConfig(seed=3)
    a = write_policy_synth(cfg, tmp_path / "a")
    b = write_policy_synth(replace(cfg), tmp_path / "b")
    for name in ("corpus.jsonl", "queries.jsonl"):
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_different_seeds_give_different_corpora():
    corpus0, queries0 = _default()
    corpus1, queries1 = generate(PolicySynthConfig(seed=1))
    assert [r["text"] for r in corpus0] != [r["text"] for r in corpus1]
    assert [q["text"] for q in queries0] != [q["text"] for q in queries1]
    # the sizes are fixed by the config, not by the seed
    assert count_vectors(corpus1) == 258 and len(queries1) == 138


def test_default_config_has_the_papers_size():
    corpus, queries = _default()
    assert count_vectors(corpus) == 258
    assert len(queries) == 138
    kinds = [q["kind"] for q in queries]
    assert (kinds.count("current"), kinds.count("as_of"), kinds.count("dependent")) == (62, 56, 20)
    assert [q["id"] for q in queries] == sorted(q["id"] for q in queries)
    stats = corpus_stats(corpus, queries)
    assert 4.25 <= stats["chunks_per_edited_document_mean"] <= 4.45
    assert stats["reembedded_per_edit_mean"] == 1.0


def test_committed_files_equal_a_fresh_generation(tmp_path):
    fresh = write_policy_synth(PolicySynthConfig(seed=0), tmp_path)
    for name in ("corpus.jsonl", "queries.jsonl"):
        assert (COMMITTED / name).read_bytes() == (fresh / name).read_bytes(), name


def test_committed_dataset_loads_strictly():
    ds = load_dataset(COMMITTED, strict=True)
    assert ds.summary()["queries"] == 138
    assert count_vectors(ds.corpus) == 258


# --- ground truth -------------------------------------------------------------------------


def test_every_query_has_a_findable_right_answer():
    corpus, queries = _default()
    docs = _versions(corpus)
    for q in queries:
        at = _ts(q["asked_at"])
        live = [_valid_at(docs[d], at) for d in q["doc_ids"]]
        assert any(v is not None and contains_answer(v["text"], q["answer"]) for v in live), q
        # the policy version in force states the answer itself
        policy = _valid_at(docs[q["meta"]["policy_doc"]], at)
        assert policy is not None and contains_answer(policy["text"], q["answer"]), q
        for s in q["stale_answers"]:
            assert not contains_answer(q["answer"], s) and not contains_answer(s, q["answer"])


def test_stale_answers_really_were_right_earlier():
    corpus, queries = _default()
    docs = _versions(corpus)
    for q in queries:
        at = _ts(q["asked_at"])
        versions = docs[q["meta"]["policy_doc"]]
        now = _valid_at(versions, at)
        earlier = [v for v in versions if _ts(v["valid_from"]) < _ts(now["valid_from"])]
        for s in q["stale_answers"]:
            assert any(contains_answer(v["text"], s) for v in earlier), (q["id"], s)
            assert not contains_answer(now["text"], s), (q["id"], s)
        # and every earlier value is listed
        assert {v["meta"]["value"] for v in earlier} == set(q["stale_answers"])


def test_query_times_follow_their_documents():
    corpus, queries = _default()
    docs = _versions(corpus)
    last_doc = max(_ts(r["valid_from"]) for r in corpus)
    for q in queries:
        at = _ts(q["asked_at"])
        assert all(_ts(docs[d][0]["valid_from"]) <= at for d in q["doc_ids"]), q["id"]
        if q["kind"] == "current":
            assert at > last_doc and not q["text"].startswith("As of")
        if q["kind"] == "as_of":
            assert q["text"].startswith("As of ")
            assert _valid_at(docs[q["meta"]["policy_doc"]], at).get("valid_to") is not None


def test_versions_are_well_formed():
    corpus, _ = _default()
    for versions in _versions(corpus).values():
        assert [v["version"] for v in versions] == list(range(1, len(versions) + 1))
        for a, b in zip(versions, versions[1:], strict=False):
            assert _ts(a["valid_from"]) < _ts(b["valid_from"])
            assert a["valid_to"] == b["valid_from"]
        assert "valid_to" not in versions[-1]
        assert all(len(c.text) < 1000 for v in versions for c in chunk_text(v["text"]))


def test_every_text_states_only_its_own_value():
    corpus, queries = _default()
    every_value = {v for values in _topic_values(corpus).values() for v in values}
    every_value |= {r["meta"]["value"] for r in corpus if r["meta"].get("injected")}
    for rec in corpus:
        stated = {v for v in every_value if contains_answer(rec["text"], v)}
        assert stated == {rec["meta"]["value"]}, (rec["doc_id"], rec["version"], stated)
    for q in queries:
        assert not any(contains_answer(q["text"], v) for v in every_value), q["id"]


def test_rumors_never_state_a_value_the_topic_takes():
    corpus, queries = generate(PolicySynthConfig(contradiction_rate=1.0))
    values = _topic_values(corpus)
    rumors = [r for r in corpus if r["meta"].get("injected") is True]
    assert len(rumors) == 31
    for r in rumors:
        assert r["source_type"] in ("slack", "chat") and r["authority"] < 0.5
        assert len(chunk_text(r["text"])) == 1 and r["version"] == 1
        assert contains_answer(r["text"], r["meta"]["value"])
        assert not any(contains_answer(r["text"], v) for v in values[r["meta"]["topic"]])
    for q in queries:
        for r in rumors:
            if r["meta"]["topic"] == q["meta"]["topic"]:
                assert not contains_answer(r["text"], q["answer"])
                assert not any(contains_answer(r["text"], s) for s in q["stale_answers"])


def test_dependents_quote_their_policy_and_some_lag_behind():
    corpus, queries = _default()
    docs = _versions(corpus)
    deps = [v for v in docs.values() if v[0]["meta"]["role"] == "dependent"]
    assert len(deps) == 10
    for versions in deps:
        (policy_id,) = versions[0]["depends_on"]
        policy_values = [v["meta"]["value"] for v in docs[policy_id]]
        for v in versions:
            assert v["depends_on"] == [policy_id]
            # a runbook version quotes a value its policy had when (or before) it was written
            in_force = _valid_at(docs[policy_id], _ts(v["valid_from"]))
            assert v["meta"]["value"] in policy_values[: in_force["version"]]
    dependent_queries = [q for q in queries if q["kind"] == "dependent"]
    assert any(q["meta"]["dependent_states"] != q["answer"] for q in dependent_queries)
    assert any(q["meta"]["dependent_states"] == q["answer"] for q in dependent_queries)


# --- updates, rumor rate, authority -------------------------------------------------------


def test_every_update_is_a_one_chunk_edit():
    corpus, _ = _default()
    for versions in _versions(corpus).values():
        for a, b in zip(versions, versions[1:], strict=False):
            diff = diff_chunks(chunk_text(a["text"]), chunk_text(b["text"]))
            assert diff.n_reembedded == 1 and len(diff.replaced) == 1
            assert not diff.added and not diff.removed


def test_a_one_value_edit_changes_exactly_one_chunk():
    corpus, _ = _default()
    rec = next(r for r in corpus if r["meta"]["role"] == "policy")
    value = rec["meta"]["value"]
    edited = rec["text"].replace(value, "999 " + value.split(" ", 1)[-1])
    old, new = chunk_text(rec["text"]), chunk_text(edited)
    assert len(old) == len(new) in (4, 5)
    assert diff_chunks(old, new).n_reembedded == 1
    assert count_vectors([rec, {**rec, "version": 2, "text": edited}]) == len(old) + 1


@pytest.mark.parametrize(
    ("rate", "expected"), [(0.0, 0), (0.25, 8), (0.5, 16), (0.75, 23), (1.0, 31)]
)
def test_rumor_count_scales_with_the_rate(rate, expected):
    base, base_queries = generate(PolicySynthConfig(contradiction_rate=0.0))
    corpus, queries = generate(PolicySynthConfig(contradiction_rate=rate))
    rumors = [r for r in corpus if r["meta"].get("injected") is True]
    assert len(rumors) == expected
    assert count_vectors(corpus) == count_vectors(base) + expected
    # the rate only adds rumors: every other record and every query is unchanged
    assert [r for r in corpus if not r["meta"].get("injected")] == base
    assert queries == base_queries


def test_rumor_sets_are_nested_across_rates():
    ids = []
    for rate in (0.25, 0.5, 0.75):
        corpus, _ = generate(PolicySynthConfig(contradiction_rate=rate))
        ids.append({r["doc_id"] for r in corpus if r["meta"].get("injected")})
    assert ids[0] < ids[1] < ids[2]


def test_authority_age_correlation_knob():
    flat, _ = generate(PolicySynthConfig(authority_age_correlation=0.0, authority_noise=0.0))
    full, _ = generate(PolicySynthConfig(authority_age_correlation=1.0))
    for rec in flat:
        if rec["meta"]["role"] == "policy":
            assert rec["source_type"] in ("policy_doc", "technical_doc")
            assert rec["authority"] in (0.9, 0.85)
    for rec in full:
        if rec["meta"]["role"] == "policy":
            lower = rec["source_type"] in ("wiki", "email")
            assert lower == (rec["version"] > 1)
    stats_flat = corpus_stats(flat, [])
    stats_full = corpus_stats(full, [])
    assert stats_flat["corr_age_authority_policies"] < stats_full["corr_age_authority_policies"]


def test_queries_paraphrase_rather_than_copy_the_fact():
    def grams(text: str, n: int = 6) -> set[tuple[str, ...]]:
        words = re.findall(r"[a-z0-9']+", text.lower())
        return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}

    for fact in FACTS:
        assert len(fact.questions) >= 2 and len(fact.dep_questions) >= 2
        for q in fact.questions:
            assert not grams(q) & grams(fact.fact), (fact.key, q)
        for q in fact.dep_questions:
            assert not grams(q) & grams(fact.dep_step), (fact.key, q)


def test_fact_bank_is_large_and_every_fact_fits_together():
    assert len(FACTS) >= 40
    assert len({f.key for f in FACTS}) == len({f.title for f in FACTS}) == len(FACTS)
    corpus, queries = generate(
        PolicySynthConfig(n_topics=len(FACTS), n_dependents=len(FACTS), seed=2)
    )
    assert len({r["meta"]["topic"] for r in corpus}) == len(FACTS)
    assert len(queries) == 138


# --- config and command line --------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"contradiction_rate": 1.5}, "contradiction_rate"),
        ({"rumor_recent_prob": -0.1}, "rumor_recent_prob"),
        ({"authority_age_correlation": 2.0}, "authority_age_correlation"),
        ({"dependent_update_prob": -1.0}, "dependent_update_prob"),
        ({"five_paragraph_fraction": 1.01}, "five_paragraph_fraction"),
        ({"n_topics": -1}, "n_topics"),
        ({"n_topics": 1000}, "n_topics"),
        ({"n_dependents": 40}, "n_dependents"),
        ({"n_current_queries": -3}, "n_current_queries"),
        ({"versions_min": 0}, "versions_min"),
        ({"versions_max": 1}, "versions_max"),
        ({"start": "2026-01-01"}, "start"),
        ({"end": "yesterday"}, "end"),
        ({"min_version_gap_days": 200}, "min_version_gap_days"),
        ({"dependent_lag_max_days": 1}, "dependent_lag_max_days"),
        ({"lower_channels": ["carrier_pigeon"]}, "lower_channels"),
        ({"authority_noise": -0.1}, "authority_noise"),
    ],
)
def test_config_validation_names_the_field(kwargs, field):
    cfg = PolicySynthConfig(**kwargs)
    with pytest.raises(ValueError, match=field):
        validate(cfg)
    with pytest.raises(ValueError, match=field):
        generate(cfg)


def test_config_is_a_structured_config():
    omegaconf = pytest.importorskip("omegaconf")
    node = omegaconf.OmegaConf.structured(PolicySynthConfig)
    node.contradiction_rate = 0.5
    cfg = omegaconf.OmegaConf.to_object(node)
    assert isinstance(cfg, PolicySynthConfig) and cfg.contradiction_rate == 0.5


def test_command_line(tmp_path, capsys):
    assert main(["--seed", "0", "--out", str(tmp_path), "--contradiction-rate", "0.5"]) == 0
    ds = load_dataset(tmp_path, strict=True)
    assert ds.summary()["injected"] == 16 and len(ds.queries) == 138
    assert main(["--out", str(tmp_path / "bad"), "--contradiction-rate", "2"]) == 2
    assert "contradiction_rate" in capsys.readouterr().err
