"""The synthetic versioned-policy corpus: sizes, determinism, and ground-truth soundness."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

import pytest

from experiments.data.dataset import load_dataset
from experiments.data.policy_synth import (
    PolicySynthConfig,
    corpus_stats,
    count_vectors,
    generate,
    load_bank,
    main,
    validate,
    write_policy_synth,
)
from experiments.protocol.answers import contains_answer
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

    for fact in load_bank().facts:
        assert len(fact.questions) >= 2 and len(fact.dep_questions) >= 2
        for q in fact.questions:
            assert not grams(q) & grams(fact.fact), (fact.key, q)
        for q in fact.dep_questions:
            assert not grams(q) & grams(fact.dep_step), (fact.key, q)


def test_fact_bank_is_large_and_every_fact_fits_together():
    facts = load_bank().facts
    assert len(facts) >= 40
    assert len({f.key for f in facts}) == len({f.title for f in facts}) == len(facts)
    corpus, queries = generate(
        PolicySynthConfig(n_topics=len(facts), n_dependents=len(facts), seed=2)
    )
    assert len({r["meta"]["topic"] for r in corpus}) == len(facts)
    assert len(queries) == 138


# --- protocol axes ------------------------------------------------------------------------

DAY = 86400.0

REGIMES: dict[str, dict] = {
    "quiet": {},
    "uniform": {"query_timing": "uniform"},
    "after_change": {"query_timing": "after_change"},
    "after_change_2d": {"query_timing": "after_change", "after_change_days": 2},
    "documents": {"supersession": "documents"},
    "documents_no_windows": {"supersession": "documents", "validity_windows": False},
    "no_windows": {"validity_windows": False},
    "off_topic": {"off_topic_share": 0.5, "contradiction_rate": 1.0},
    "combined": {"query_timing": "uniform", "supersession": "documents",
                 "off_topic_share": 1.0, "seed": 4},
}  # fmt: skip


@cache
def _regime(name: str) -> tuple[list[dict], list[dict]]:
    return generate(PolicySynthConfig(**REGIMES[name]))


def _policy_records(corpus: list[dict], topic: str) -> list[dict]:
    """The topic's policy versions in time order, whatever the supersession."""
    recs = [r for r in corpus if r["meta"].get("role") == "policy" and r["meta"]["topic"] == topic]
    return sorted(recs, key=lambda r: _ts(r["valid_from"]))


def _in_force(records: list[dict], at: float) -> dict:
    return [r for r in records if _ts(r["valid_from"]) <= at][-1]


@pytest.mark.parametrize("regime", list(REGIMES))
def test_every_regime_loads_with_every_query_answerable(regime, tmp_path):
    cfg = PolicySynthConfig(**REGIMES[regime])
    ds = load_dataset(write_policy_synth(cfg, tmp_path), strict=True)
    assert not ds.unanswerable and len(ds.queries) == 138


@pytest.mark.parametrize("regime", list(REGIMES))
def test_ground_truth_holds_in_every_regime(regime):
    corpus, queries = _regime(regime)
    by_id = _versions(corpus)
    for q in queries:
        at = _ts(q["asked_at"])
        policy = _policy_records(corpus, q["meta"]["topic"])
        now = _in_force(policy, at)
        assert now["meta"]["value"] == q["answer"], q["id"]
        assert [r["meta"]["value"] for r in policy if _ts(r["valid_from"]) < _ts(
            now["valid_from"])] == q["stale_answers"], q["id"]  # fmt: skip
        assert q["meta"]["version_in_force"] == policy.index(now) + 1
        # every listed document exists by then, and one of them states the answer
        assert all(_ts(by_id[d][0]["valid_from"]) <= at for d in q["doc_ids"]), q["id"]
        assert any(contains_answer(_in_force(by_id[d], at)["text"], q["answer"])
                   for d in q["doc_ids"]), q["id"]  # fmt: skip
        if q["kind"] == "current":
            assert not q["text"].startswith("As of")
        if q["kind"] == "as_of":  # dated, asked strictly between two versions
            assert q["text"].startswith("As of ") and now is not policy[-1]


@pytest.mark.parametrize(("gap", "window"), [(45, 30), (60, 10)])
def test_quiet_current_queries_follow_a_revision_free_window(gap, window):
    cfg = PolicySynthConfig(min_version_gap_days=gap, query_window_days=window)
    corpus, queries = generate(cfg)
    window_start = datetime.fromisoformat(cfg.end).date() - timedelta(days=window - 1)
    revisions = [datetime.fromisoformat(r["valid_from"]).date() for r in corpus
                 if r["meta"]["role"] == "policy"]  # fmt: skip
    # no policy revision (of any topic) in the `gap` days before the query window ...
    assert all((window_start - day).days >= gap for day in revisions)
    assert any((window_start - day).days < gap + 30 for day in revisions)
    # ... and every current query is asked in that window
    current = [q for q in queries if q["kind"] == "current"]
    assert len(current) == 62
    for q in current:
        assert datetime.fromisoformat(q["asked_at"]).date() >= window_start


def test_uniform_current_queries_spread_over_the_timeline():
    corpus, queries = _regime("uniform")
    current = [q for q in queries if q["kind"] == "current"]
    first = min(_ts(r["valid_from"]) for r in corpus)
    end = _ts("2026-01-01T00:00:00Z")
    quarters = [0, 0, 0, 0]
    for q in current:
        at = _ts(q["asked_at"])
        assert _ts(_policy_records(corpus, q["meta"]["topic"])[0]["valid_from"]) < at < end
        quarters[min(3, int(4 * (at - first) / (end - first)))] += 1
    assert min(quarters) >= 0.1 * len(current), quarters
    # in the middle of churn: many are asked before a later revision of their topic
    stats = corpus_stats(corpus, queries)
    assert stats["current_queries_before_a_later_revision"] >= len(current) / 4
    assert stats["current_days_since_change"]["min"] < 45
    # revisions run on to the end of the span (quiet stops them 75 days before it)
    last = max(_ts(r["valid_from"]) for r in corpus if r["meta"]["role"] == "policy")
    assert end - last < 30 * DAY


@pytest.mark.parametrize("regime", ["after_change", "after_change_2d"])
def test_after_change_queries_are_asked_soon_after_their_answer_appeared(regime):
    corpus, queries = _regime(regime)
    days = REGIMES[regime].get("after_change_days", 7)
    current = [q for q in queries if q["kind"] == "current"]
    assert len(current) == 62
    for q in current:
        at = _ts(q["asked_at"])
        policy = _policy_records(corpus, q["meta"]["topic"])
        now = _in_force(policy, at)
        assert 0 < at - _ts(now["valid_from"]) <= days * DAY, q["id"]
        # the version in force is a revision, so there is a stale value to fall for
        assert now is not policy[0] and q["stale_answers"], q["id"]
    assert corpus_stats(corpus, queries)["current_days_since_change"]["max"] <= days


def test_timing_regimes_other_than_quiet_share_one_corpus():
    uniform, uq = _regime("uniform")
    after, aq = _regime("after_change")
    assert uniform == after

    def others(queries: list[dict]) -> list[dict]:
        return [{**q, "id": None} for q in queries if q["kind"] != "current"]

    assert others(uq) == others(aq)
    assert [q["asked_at"] for q in uq] != [q["asked_at"] for q in aq]


@pytest.mark.parametrize("windows", [True, False])
def test_documents_supersession_gives_one_document_per_version(windows):
    base, base_queries = generate(PolicySynthConfig(validity_windows=windows))
    corpus, queries = generate(PolicySynthConfig(supersession="documents",
                                                 validity_windows=windows))  # fmt: skip
    docs = _versions(corpus)
    assert all(len(v) == 1 and v[0]["version"] == 1 for v in docs.values())
    assert len(corpus) == len(base)
    # the same records, each version renamed <doc_id>-v<k>; runbooks depend on the policy
    # version whose value they quote
    renamed = {}
    for rec in base:
        new_id = rec["doc_id"] if rec["meta"].get("injected") else (
            f"{rec['doc_id']}-v{rec['version']}")  # fmt: skip
        renamed[(rec["doc_id"], rec["version"])] = new_id
        twin = docs[new_id][0]
        keep = ("valid_from", "source_type", "authority", "author", "text")
        assert all(twin[k] == rec[k] for k in keep), new_id
        for dep in twin.get("depends_on", []):
            assert docs[dep][0]["meta"]["value"] == rec["meta"]["value"]
    # queries list every version-document of their series that exists when they are asked
    for q, bq in zip(queries, base_queries, strict=True):
        assert (q["asked_at"], q["text"], q["answer"]) == (bq["asked_at"], bq["text"], bq["answer"])
        at = _ts(q["asked_at"])
        expected = [renamed[(d, r["version"])] for d in bq["doc_ids"]
                    for r in _versions(base)[d] if _ts(r["valid_from"]) <= at]  # fmt: skip
        assert q["doc_ids"] == expected
        # exactly the version in force (and runbook versions quoting it) states the answer
        stating = [d for d in q["doc_ids"] if contains_answer(docs[d][0]["text"], q["answer"])]
        policy_stating = [d for d in stating if docs[d][0]["meta"]["role"] == "policy"]
        assert policy_stating == [q["meta"]["policy_doc"]]


@pytest.mark.parametrize("regime", ["quiet", "no_windows", "documents", "documents_no_windows"])
def test_validity_windows_present_or_absent_as_configured(regime):
    corpus, _ = _regime(regime)
    windows = REGIMES[regime].get("validity_windows", True)
    for topic_role in {(r["meta"]["topic"], r["meta"]["role"]) for r in corpus}:
        recs = sorted((r for r in corpus if (r["meta"]["topic"], r["meta"]["role"]) == topic_role),
                      key=lambda r: _ts(r["valid_from"]))  # fmt: skip
        for a, b in zip(recs, recs[1:], strict=False):
            assert a.get("valid_to") == (b["valid_from"] if windows else None)
        assert "valid_to" not in recs[-1]


@pytest.mark.parametrize("regime", ["quiet", "documents", "off_topic", "combined"])
def test_rumors_say_what_they_contradict(regime):
    corpus, queries = _regime(regime)
    cfg = PolicySynthConfig(**REGIMES[regime])
    injected = [r for r in corpus if r["meta"].get("injected") is True]
    rumors = [r for r in injected if r["meta"]["role"] == "rumor"]
    off_topic = [r for r in injected if r["meta"]["role"] == "off_topic"]
    assert len(rumors) + len(off_topic) == len(injected)
    assert len(off_topic) == int(cfg.off_topic_share * len(injected) + 0.5)
    for r in rumors:  # every document stating the topic's fact, and nothing else
        topic_docs = [g["doc_id"] for g in corpus if g["meta"]["topic"] == r["meta"]["topic"]
                      and g["meta"]["role"] in ("policy", "dependent")]  # fmt: skip
        assert sorted(r["meta"]["contradicts"]) == sorted(set(topic_docs))
    for q in queries:
        for r in rumors:
            same_topic = r["meta"]["topic"] == q["meta"]["topic"]
            assert bool(set(r["meta"]["contradicts"]) & set(q["doc_ids"])) == same_topic


def test_off_topic_chunks_are_marked_and_state_nothing():
    corpus, queries = _regime("off_topic")
    base, base_queries = generate(PolicySynthConfig(contradiction_rate=1.0))
    values = {r["meta"]["value"] for r in base}
    off = [r for r in corpus if r["meta"]["role"] == "off_topic"]
    assert len(off) == 16
    for r in off:
        assert r["meta"]["injected"] is True and r["meta"]["contradicts"] == []
        assert "value" not in r["meta"] and not re.search(r"\d", r["text"])
        assert not any(contains_answer(r["text"], v) for v in values)
    # the share only rewrites injected chunks: same ids, times and authors; all else equal
    assert queries == base_queries
    assert [r for r in corpus if not r["meta"].get("injected")] == [
        r for r in base if not r["meta"].get("injected")]  # fmt: skip
    twins = {r["doc_id"]: r for r in base}
    for r in off:
        t = twins[r["doc_id"]]
        assert (r["valid_from"], r["author"], r["authority"]) == (
            t["valid_from"], t["author"], t["authority"])  # fmt: skip
        assert t["meta"]["role"] == "rumor" and r["text"] != t["text"]


@pytest.mark.parametrize("mix", [(0, 0, 5), (10, 0, 0), (0, 7, 0), (3, 100, 41)])
def test_query_kind_mix_is_an_axis(mix, tmp_path):
    cfg = PolicySynthConfig(n_current_queries=mix[0], n_as_of_queries=mix[1],
                            n_dependent_queries=mix[2])  # fmt: skip
    ds = load_dataset(write_policy_synth(cfg, tmp_path), strict=True)
    kinds = [q.kind for q in ds.queries]
    assert (kinds.count("current"), kinds.count("as_of"), kinds.count("dependent")) == mix


def test_many_queries_keep_ids_in_time_order():
    _, queries = generate(PolicySynthConfig(n_current_queries=1000))
    ids = [q["id"] for q in queries]
    assert ids[0] == "q0001" and ids == sorted(ids) and len(set(ids)) == 1000 + 56 + 20


def test_missing_or_broken_fact_bank_is_a_one_line_error(tmp_path):
    with pytest.raises(ValueError, match="fact bank .*missing") as e:
        load_bank(tmp_path / "bank.json")
    assert "\n" not in str(e.value)
    (tmp_path / "bank.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="fact bank") as e:
        load_bank(tmp_path / "bank.json")
    assert "\n" not in str(e.value)
    (tmp_path / "bank.json").write_text('{"facts": [{"key": "x"}]}', encoding="utf-8")
    with pytest.raises(ValueError, match="malformed") as e:
        load_bank(tmp_path / "bank.json")
    assert "\n" not in str(e.value)


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
        ({"n_topics": 0}, "n_topics"),
        ({"query_window_days": 0}, "query_window_days"),
        ({"query_timing": "sometimes"}, "query_timing"),
        ({"after_change_days": 0}, "after_change_days"),
        ({"off_topic_share": 1.5}, "off_topic_share"),
        ({"supersession": "forks"}, "supersession"),
        ({"validity_windows": "yes"}, "validity_windows"),
        ({"versions_min": 1, "versions_max": 1}, "n_as_of_queries"),
        ({"n_dependents": 0}, "n_dependent_queries"),
        (
            {"n_current_queries": 0, "n_as_of_queries": 0, "n_dependent_queries": 0},
            "n_current_queries",
        ),
        ({"query_timing": "uniform", "min_version_gap_days": 300}, "min_version_gap_days"),
    ],
)
def test_config_validation_names_the_field(kwargs, field):
    cfg = PolicySynthConfig(**kwargs)
    with pytest.raises(ValueError, match=field) as e:
        validate(cfg)
    assert "\n" not in str(e.value)
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
