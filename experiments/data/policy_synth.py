"""A seeded generator of the paper's synthetic versioned-policy corpus.

Enterprise policies and runbooks state facts (durations, limits, thresholds) that change over
about two years. Each *topic* is one such fact living in one policy document of four or five
paragraphs; every revision changes the value in exactly one paragraph (a one-value edit).
Some runbooks ``depends_on`` a policy and quote its value; they are updated after a policy
change only sometimes and after a lag, so some go on quoting a stale value. At a configurable
rate, a topic gets an injected Slack/chat rumor stating a value the topic never takes.

The facts and wordings live in ``datasets/policy_synth/bank.json`` (``load_bank``). Protocol
axes (when `current` queries are asked, off-topic injections, one document per version, validity
windows) are config fields whose defaults give the committed corpus. Every random choice comes
from ``random.Random`` streams derived from ``cfg.seed`` (one stream per concern, so the rumor
rate or the propagation rate does not move any other draw); the same config gives
byte-identical files. ``datasets/policy_synth/README.md`` documents the design, the axes and
the measured statistics of the committed corpus.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, date, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from experiments.data.registry import DatasetKind
from experiments.protocol.answers import contains_answer, normalise
from smartvector.chunking import chunk_text, diff_chunks
from smartvector.sources import SOURCE_AUTHORITY

# --- configuration ------------------------------------------------------------------------


@dataclass
class PolicySynthConfig:
    """Knobs of the generator; the defaults give the committed corpus (258 vectors, 138
    queries). Usable as a Hydra structured config."""

    seed: int = 0
    n_topics: int = 31  # policy documents, one fact each (at most the bank's 45 facts)
    versions_min: int = 2  # versions per policy, spread evenly over [min, max]
    versions_max: int = 4
    start: str = "2024-01-01"  # first day of the time span (UTC)
    end: str = "2025-12-31"  # last day of the time span (inclusive)
    initial_window_days: int = 90  # every policy's version 1 appears in the first N days
    min_version_gap_days: int = 45  # between two versions, and before the query window
    query_window_days: int = 30  # quiet: `current` queries are asked in the last N days
    five_paragraph_fraction: float = 0.35  # share of policy+runbook docs with 5 paragraphs
    n_dependents: int = 10  # runbooks, each depending on one distinct policy
    dependent_update_prob: float = 0.6  # share of (runbook, policy change) pairs propagated
    dependent_lag_min_days: int = 3
    dependent_lag_max_days: int = 45
    contradiction_rate: float = 0.25  # share of topics that get an injected rumor
    rumor_recent_prob: float = 0.6  # rumor after the latest version (else between two)
    authority_age_correlation: float = 0.4  # P(a revision goes out via a lower channel)
    authority_noise: float = 0.03  # half-width of the uniform jitter added to authority
    lower_channels: list[str] = field(default_factory=lambda: ["wiki", "email"])
    dependent_channels: list[str] = field(default_factory=lambda: ["technical_doc", "wiki"])
    rumor_channels: list[str] = field(default_factory=lambda: ["slack", "chat"])
    n_current_queries: int = 62
    n_as_of_queries: int = 56
    n_dependent_queries: int = 20
    # protocol axes (datasets/policy_synth/README.md, "Protocol axes")
    query_timing: str = "quiet"  # when `current` queries are asked: one of QUERY_TIMINGS
    after_change_days: int = 7  # after_change: asked within N days after the answer appeared
    off_topic_share: float = 0.0  # share of injected chunks that are off-topic, not rumors
    supersession: str = "versions"  # versions: one document per series; documents: one each
    validity_windows: bool = True  # a version carries valid_to = the next one's valid_from
    #: which facts of the bank topics are drawn from: all, or its development or test half
    #: (:func:`fact_split`), so that held-out corpora share no fact with development ones
    facts: str = "all"


#: ``quiet``: revisions stop ``min_version_gap_days`` before the query window, in which every
#: `current` query is asked; ``uniform``: revisions run to the end of the span and `current`
#: queries are asked at uniform times after their topic's version 1; ``after_change``: like
#: uniform, each asked within ``after_change_days`` after a revision of its topic.
QUERY_TIMINGS = ("quiet", "uniform", "after_change")
SUPERSESSIONS = ("versions", "documents")
FACT_SPLITS = ("all", "dev", "test")


def fact_split(key: str) -> str:
    """``dev`` or ``test``: the half of the fact bank a fact belongs to, by a stable hash of
    its key (not seeded: the same for every seed; 21 development and 24 test facts)."""
    h = int.from_bytes(hashlib.sha256(f"fact:{key}".encode()).digest()[:8], "big") / 2**64
    return "dev" if h < 0.5 else "test"


def bank_facts(which: str) -> list[Fact]:
    """The bank's facts of one half (or all), in bank order."""
    return [f for f in load_bank().facts if which == "all" or fact_split(f.key) == which]


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5 + 1e-9)


def _parse_day(value: str, name: str) -> date:
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an ISO date YYYY-MM-DD, got {value!r}") from None


def validate(cfg: PolicySynthConfig) -> None:
    """Raise ``ValueError`` naming the first field that is out of range."""
    for name in (
        "five_paragraph_fraction", "dependent_update_prob", "contradiction_rate",
        "rumor_recent_prob", "authority_age_correlation", "off_topic_share",
    ):  # fmt: skip
        value = getattr(cfg, name)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    if not 0.0 <= cfg.authority_noise <= 0.5:
        raise ValueError(f"authority_noise must be in [0, 0.5], got {cfg.authority_noise!r}")
    for name in (
        "n_topics", "n_dependents", "n_current_queries", "n_as_of_queries",
        "n_dependent_queries", "query_window_days",
    ):  # fmt: skip
        if getattr(cfg, name) < 0:
            raise ValueError(f"{name} must be >= 0, got {getattr(cfg, name)!r}")
    for name in ("n_topics", "query_window_days", "after_change_days"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(cfg, name)!r}")
    if cfg.query_timing not in QUERY_TIMINGS:
        raise ValueError(
            f"query_timing must be one of {', '.join(QUERY_TIMINGS)}, got {cfg.query_timing!r}"
        )
    if cfg.supersession not in SUPERSESSIONS:
        raise ValueError(
            f"supersession must be one of {', '.join(SUPERSESSIONS)}, got {cfg.supersession!r}"
        )
    if not isinstance(cfg.validity_windows, bool):
        raise ValueError(f"validity_windows must be true or false, got {cfg.validity_windows!r}")
    if cfg.facts not in FACT_SPLITS:
        raise ValueError(f"facts must be one of {', '.join(FACT_SPLITS)}, got {cfg.facts!r}")
    n_facts = len(bank_facts(cfg.facts))
    if cfg.n_topics > n_facts:
        raise ValueError(f"n_topics must be <= {n_facts} (the fact bank's facts={cfg.facts} "
                         f"facts), got {cfg.n_topics}")
    if cfg.n_dependents > cfg.n_topics:
        raise ValueError(f"n_dependents must be <= n_topics, got {cfg.n_dependents}")
    if cfg.n_current_queries + cfg.n_as_of_queries + cfg.n_dependent_queries < 1:
        raise ValueError("n_current_queries + n_as_of_queries + n_dependent_queries must be >= 1")
    if cfg.n_dependent_queries > 0 and cfg.n_dependents == 0:
        raise ValueError("n_dependent_queries must be 0 when n_dependents is 0")
    if cfg.versions_min < 1:
        raise ValueError(f"versions_min must be >= 1, got {cfg.versions_min}")
    if cfg.versions_max < cfg.versions_min:
        raise ValueError(f"versions_max must be >= versions_min, got {cfg.versions_max}")
    counts = [
        *_balanced(cfg.n_dependents, cfg.versions_min, cfg.versions_max),
        *_balanced(cfg.n_topics - cfg.n_dependents, cfg.versions_min, cfg.versions_max),
    ]
    if cfg.n_as_of_queries > 0 and max(counts) < 2:
        raise ValueError("n_as_of_queries must be 0 when no policy has two versions")
    if cfg.initial_window_days < 1:
        raise ValueError(f"initial_window_days must be >= 1, got {cfg.initial_window_days}")
    if cfg.min_version_gap_days < 2:
        raise ValueError(f"min_version_gap_days must be >= 2, got {cfg.min_version_gap_days}")
    if cfg.dependent_lag_min_days < 1:
        raise ValueError(
            f"dependent_lag_min_days must be >= 1, got {cfg.dependent_lag_min_days}"
        )
    if cfg.dependent_lag_max_days < cfg.dependent_lag_min_days:
        raise ValueError(
            "dependent_lag_max_days must be >= dependent_lag_min_days, "
            f"got {cfg.dependent_lag_max_days}"
        )
    start = _parse_day(cfg.start, "start")
    end = _parse_day(cfg.end, "end")
    if start >= end:
        raise ValueError(f"start must be before end, got {cfg.start} >= {cfg.end}")
    n_days = (end - start).days + 1
    if cfg.query_timing == "quiet":
        room, what = n_days - cfg.query_window_days, "minus the query window "
    else:  # revisions run until 2 days before the last day (room for a rumor after)
        room, what = n_days - 3 + cfg.min_version_gap_days, ""
    need = cfg.initial_window_days + cfg.versions_max * cfg.min_version_gap_days + 1
    if room < need:
        raise ValueError(
            f"min_version_gap_days: the span {cfg.start}..{cfg.end} {what}"
            f"has {room} days, {need} needed for versions_max={cfg.versions_max} "
            "versions this far apart"
        )
    for name, allowed in (
        ("lower_channels", SOURCE_AUTHORITY),
        ("dependent_channels", SOURCE_AUTHORITY),
        ("rumor_channels", SOURCE_AUTHORITY),
    ):
        values = list(getattr(cfg, name))
        if not values or any(v not in allowed for v in values):
            raise ValueError(f"{name} must be a non-empty list of source types, got {values}")


# --- the fact bank ------------------------------------------------------------------------

BANK_PATH = Path(__file__).resolve().parents[2] / "datasets" / "policy_synth" / "bank.json"


@dataclass(frozen=True)
class Fact:
    """One policy fact: its document, value ladder and the wording around the value.

    ``fact``, ``claim`` and ``dep_step`` contain ``{v}``, the value. ``trend`` is the usual
    direction of change along ``ladder`` (+1 up, -1 down, 0 either).
    """

    key: str
    title: str
    home: str
    team: str
    ladder: tuple[str, ...]
    trend: int
    purpose: str
    fact: str
    questions: tuple[str, ...]
    claim: str
    side_claim: str  # a claim near the topic that no document states (no value)
    dep_title: str
    dep_step: str
    dep_questions: tuple[str, ...]


@dataclass(frozen=True)
class Bank:
    """The facts and the wording pools the generator draws from (``bank.json``)."""

    facts: tuple[Fact, ...]
    team_short: Mapping[str, str]  # team -> how chat messages name it
    names: tuple[str, ...]  # authors
    rumor_rooms: tuple[str, ...]
    intro_tail: tuple[str, ...]
    scope: tuple[str, ...]
    requirement_tail: tuple[str, ...]
    ownership: tuple[str, ...]
    fifth: tuple[str, ...]
    dep_intro: tuple[str, ...]
    dep_before: tuple[str, ...]
    dep_first: tuple[str, ...]
    dep_last: tuple[str, ...]
    dep_trouble: tuple[str, ...]
    dep_history: tuple[str, ...]
    rumor: tuple[str, ...]
    months: tuple[str, ...]


@cache
def load_bank(path: Path = BANK_PATH) -> Bank:
    """The fact bank at ``path``, read once; a one-line ``ValueError`` if it is missing or
    malformed."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"fact bank {path} is missing (restore it from the repository)") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"fact bank {path}: {e}") from None
    try:
        facts = tuple(
            Fact(**{k: tuple(v) if isinstance(v, list) else v for k, v in f.items()})
            for f in raw["facts"]
        )
        pools = {
            name: tuple(raw[name]) for name in Bank.__dataclass_fields__
            if name not in ("facts", "team_short")
        }  # fmt: skip
        return Bank(facts=facts, team_short=dict(raw["team_short"]), **pools)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"fact bank {path}: missing or malformed entry ({e})") from None


# --- text building ------------------------------------------------------------------------


def _kind(title: str) -> str:
    last = title.split()[-1].lower()
    return {"how-to": "how-to guide"}.get(last, last)


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _lower_first(text: str) -> str:
    return text[0].lower() + text[1:] if len(text) > 1 and text[1].islower() else text


def _date_phrase(t: datetime) -> str:
    return f"{load_bank().months[t.month - 1]} {t.day}, {t.year}"


# --- generation ---------------------------------------------------------------------------


@dataclass
class _Topic:
    slot: int
    fact: Fact
    values: list[str]  # value of version 1, 2, ... of the policy
    rumor_value: str
    days: list[int] = field(default_factory=list)  # day offset of each policy version
    times: list[datetime] = field(default_factory=list)
    has_dependent: bool = False
    dep_times: list[datetime] = field(default_factory=list)
    dep_values: list[str] = field(default_factory=list)


def _rng(cfg: PolicySynthConfig, stream: str) -> random.Random:
    return random.Random(f"policy_synth/{cfg.seed}/{stream}")


def _balanced(n: int, lo: int, hi: int) -> list[int]:
    """``n`` values cycling through ``lo..hi`` (so their sum does not depend on the seed)."""
    span = hi - lo + 1
    return [lo + i % span for i in range(n)]


def _conflicts(a: str, b: str) -> bool:
    return contains_answer(a, b) or contains_answer(b, a)


def _pick_values(
    fact: Fact, n_versions: int, used: list[str], rng: random.Random
) -> tuple[list[str], str] | None:
    """``n_versions`` distinct values on a monotone path and a never-taken rumor value, none
    of which can be confused with a value another topic already uses; None if impossible."""
    avail = [v for v in fact.ladder if not any(_conflicts(v, u) for u in used)]
    if len(avail) < n_versions + 1:
        return None
    first = rng.randrange(len(avail) - n_versions + 1)
    path = avail[first : first + n_versions]
    direction = fact.trend or rng.choice((1, -1))
    if direction < 0:
        path.reverse()
    near = (first - 2, first - 1, first + n_versions, first + n_versions + 1)
    near = [i for i in near if 0 <= i < len(avail)]
    rumor = avail[rng.choice(near)]
    return path, rumor


def _first_fitting(
    bank: Sequence[Fact], n_versions: int, used: list[str], rng: random.Random
) -> tuple[Fact | None, tuple[list[str], str] | None]:
    """The first fact of ``bank`` that can take ``n_versions`` values, and those values."""
    for fact in bank:
        picked = _pick_values(fact, n_versions, used, rng)
        if picked is not None:
            return fact, picked
    return None, None


def _choose_topics(cfg: PolicySynthConfig) -> list[_Topic]:
    n_dep = cfg.n_dependents
    dep_versions = _balanced(n_dep, cfg.versions_min, cfg.versions_max)
    other_versions = _balanced(cfg.n_topics - n_dep, cfg.versions_min, cfg.versions_max)
    vrng = _rng(cfg, "versions")
    vrng.shuffle(dep_versions)
    vrng.shuffle(other_versions)
    versions = dep_versions + other_versions
    bank = bank_facts(cfg.facts)
    _rng(cfg, "facts").shuffle(bank)
    value_rng = _rng(cfg, "values")
    used: list[str] = []
    topics: list[_Topic] = []
    for slot, n_versions in enumerate(versions):
        fact, picked = _first_fitting(bank, n_versions, used, value_rng)
        if picked is None:
            raise ValueError(
                f"n_topics: cannot give {cfg.n_topics} topics values that no other topic "
                "uses; lower n_topics or versions_max"
            )
        bank.remove(fact)
        path, rumor = picked
        used.extend([*path, rumor])
        topics.append(_Topic(slot, fact, path, rumor, has_dependent=slot < n_dep))
    return topics


def _at(base: datetime, day: int, rng: random.Random) -> datetime:
    """A business-hours time on day ``day`` after ``base``."""
    return base + timedelta(days=day, hours=rng.randint(8, 17), minutes=rng.randrange(60))


def _authority(source_type: str, cfg: PolicySynthConfig, rng: random.Random) -> float:
    jitter = rng.uniform(-cfg.authority_noise, cfg.authority_noise)
    return round(min(1.0, max(0.0, SOURCE_AUTHORITY[source_type] + jitter)), 2)


def _policy_paragraphs(fact: Fact, rng: random.Random, five: bool) -> list[str]:
    """The paragraphs of a policy document; the third holds ``{v}``."""
    pools = load_bank()
    kind = _kind(fact.title)
    fmt = {"kind": kind, "team": fact.team}
    paragraphs = [
        f"# {fact.title}\n{fact.purpose} {rng.choice(pools.intro_tail).format(**fmt)}",
        rng.choice(pools.scope).format(**fmt),
        f"## Requirement\n{fact.fact} {rng.choice(pools.requirement_tail)}",
        rng.choice(pools.ownership).format(**fmt),
    ]
    if five:
        paragraphs.append(rng.choice(pools.fifth).format(**fmt))
    return paragraphs


def _dependent_paragraphs(fact: Fact, rng: random.Random, five: bool) -> list[str]:
    """The paragraphs of a runbook quoting the policy; the third holds ``{v}``."""
    pools = load_bank()
    fmt = {
        "dkind": _kind(fact.dep_title),
        "pkind": _kind(fact.title),
        "policy": fact.title,
        "team": fact.team,
    }
    steps = f"- {rng.choice(pools.dep_first)}\n- {fact.dep_step}\n- {rng.choice(pools.dep_last)}"
    paragraphs = [
        f"# {fact.dep_title}\n{rng.choice(pools.dep_intro).format(**fmt)}",
        rng.choice(pools.dep_before),
        f"## Steps\n{steps}",
        rng.choice(pools.dep_trouble).format(**fmt),
    ]
    if five:
        paragraphs.append(rng.choice(pools.dep_history).format(**fmt))
    return paragraphs


def _render(paragraphs: Sequence[str], value: str) -> str:
    return "\n\n".join(p.replace("{v}", value) for p in paragraphs)


def _revision_days(v1: int, n_rev: int, hi: int, gap: int, rng: random.Random) -> list[int]:
    """``n_rev`` days in ``[v1 + gap, hi]``, at least ``gap`` apart (uniform spacings)."""
    lo = v1 + gap
    free = hi - lo - (n_rev - 1) * gap
    offsets = sorted(rng.randint(0, free) for _ in range(n_rev))
    return [lo + u + j * gap for j, u in enumerate(offsets)]


def _doc_record(
    doc_id: str, version: int, when: datetime, until: datetime | None, source_type: str,
    authority: float, author: str, text: str, meta: dict[str, Any],
    depends_on: Sequence[str] = (),
) -> dict[str, Any]:  # fmt: skip
    rec: dict[str, Any] = {"doc_id": doc_id, "version": version, "valid_from": _iso(when)}
    if until is not None:
        rec["valid_to"] = _iso(until)
    rec.update(source_type=source_type, authority=authority, author=author)
    if depends_on:
        rec["depends_on"] = list(depends_on)
    rec.update(text=text, meta=meta)
    return rec


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _series_ids(doc_id: str, n: int, split: bool) -> list[str]:
    """Ids of the first ``n`` versions of a series: the one document ``doc_id``, or (when
    ``split``, ``supersession="documents"``) one document ``<doc_id>-v<k>`` per version."""
    return [f"{doc_id}-v{k}" for k in range(1, n + 1)] if split else [doc_id]


def _series(
    cfg: PolicySynthConfig, doc_id: str, times: Sequence[datetime], texts: Sequence[str],
    channels: Sequence[str], authorities: Sequence[float], authors: Sequence[str],
    metas: Sequence[dict[str, Any]], depends_on: Sequence[Sequence[str]] | None = None,
) -> list[list[dict[str, Any]]]:  # fmt: skip
    """The documents of one versioned series, each a list of its version records: one
    document with a version per record, or one document per version (``supersession``).
    ``depends_on[k]`` is what version ``k`` depends on."""
    split = cfg.supersession == "documents"
    out = []
    for k, when in enumerate(times):
        until = times[k + 1] if k + 1 < len(times) and cfg.validity_windows else None
        out.append(_doc_record(
            f"{doc_id}-v{k + 1}" if split else doc_id, 1 if split else k + 1, when, until,
            channels[k], authorities[k], authors[k], texts[k], metas[k],
            depends_on[k] if depends_on else (),
        ))  # fmt: skip
    return [[rec] for rec in out] if split else [out]


def generate(cfg: PolicySynthConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Corpus records (grouped by document, versions ascending, documents in order of their
    first version) and query records (sorted by id), for ``write_dataset``."""
    validate(cfg)
    start = _parse_day(cfg.start, "start")
    base = datetime(start.year, start.month, start.day, tzinfo=UTC)
    n_days = (_parse_day(cfg.end, "end") - start).days + 1
    window = n_days - cfg.query_window_days  # first day of the query window
    gap = cfg.min_version_gap_days
    quiet = cfg.query_timing == "quiet"
    # revisions, runbook updates and rumors fall on days before `horizon`; revisions on
    # days up to `last_revision`, which leaves room for a rumor or runbook update after them
    horizon = window if quiet else n_days - 1
    last_revision = window - gap if quiet else n_days - 3
    split = cfg.supersession == "documents"
    topics = _choose_topics(cfg)
    n_dep = cfg.n_dependents
    pools = load_bank()

    n_docs = cfg.n_topics + n_dep
    five = set(_rng(cfg, "mix").sample(range(n_docs), _round_half_up(
        cfg.five_paragraph_fraction * n_docs)))  # fmt: skip

    # (runbook slot, revision index) pairs whose policy change reaches the runbook
    pairs = [(t.slot, k) for t in topics[:n_dep] for k in range(1, len(t.values))]
    _rng(cfg, "propagation").shuffle(pairs)
    propagated = set(pairs[: _round_half_up(cfg.dependent_update_prob * len(pairs))])

    docs: list[list[dict[str, Any]]] = []
    for t in topics:
        r = _rng(cfg, f"topic/{t.slot}")
        fact = t.fact
        v1 = r.randrange(cfg.initial_window_days)
        t.days = [v1, *_revision_days(v1, len(t.values) - 1, last_revision, gap, r)]
        t.times = [_at(base, d, r) for d in t.days]
        channels = [fact.home] + [
            r.choice(cfg.lower_channels) if r.random() < cfg.authority_age_correlation
            else fact.home
            for _ in t.values[1:]
        ]  # fmt: skip
        paragraphs = _policy_paragraphs(fact, r, t.slot in five)
        policy_id = _slug(fact.title)
        docs.extend(_series(
            cfg, policy_id, t.times, [_render(paragraphs, v) for v in t.values], channels,
            [_authority(c, cfg, r) for c in channels], [r.choice(pools.names) for _ in t.values],
            [{"topic": fact.key, "role": "policy", "value": v} for v in t.values],
        ))  # fmt: skip
        if not t.has_dependent:
            continue
        d = _rng(cfg, f"dependent/{t.slot}")
        end_first = t.days[1] if len(t.days) > 1 else horizon
        dep_days = [d.randint(t.days[0] + 1, end_first - 1)]
        t.dep_values = [t.values[0]]
        for k in range(1, len(t.values)):
            lag = d.randint(cfg.dependent_lag_min_days, cfg.dependent_lag_max_days)
            if (t.slot, k) not in propagated:
                continue
            limit = (t.days[k + 1] if k + 1 < len(t.days) else horizon) - 1
            dep_days.append(min(t.days[k] + lag, limit))
            t.dep_values.append(t.values[k])
        t.dep_times = [_at(base, day, d) for day in dep_days]
        channel = d.choice(cfg.dependent_channels)
        dep_paragraphs = _dependent_paragraphs(fact, d, cfg.n_topics + t.slot in five)
        author = d.choice(pools.names)
        # each runbook version restates the policy version whose value it quotes
        quoted = [_series_ids(policy_id, t.values.index(v) + 1, split)[-1] for v in t.dep_values]
        docs.extend(_series(
            cfg, _slug(fact.dep_title), t.dep_times,
            [_render(dep_paragraphs, v) for v in t.dep_values],
            [channel] * len(dep_days), [_authority(channel, cfg, d) for _ in dep_days],
            [author] * len(dep_days),
            [{"topic": fact.key, "role": "dependent", "value": v} for v in t.dep_values],
            depends_on=[[q] for q in quoted],
        ))  # fmt: skip

    order = _rng(cfg, "rumor-order").sample(range(cfg.n_topics), cfg.n_topics)
    injected = order[: _round_half_up(cfg.contradiction_rate * cfg.n_topics)]
    off_topic = set(_rng(cfg, "off-topic").sample(
        injected, _round_half_up(cfg.off_topic_share * len(injected))))  # fmt: skip
    for slot in injected:
        t = topics[slot]
        r = _rng(cfg, f"rumor/{slot}")
        if r.random() < cfg.rumor_recent_prob or len(t.days) == 1:
            day = r.randint(t.days[-1] + 1, horizon - 1)
        else:
            k = r.randrange(len(t.days) - 1)
            day = r.randint(t.days[k] + 1, t.days[k + 1] - 1)
        channel = r.choice(cfg.rumor_channels)
        room = r.choice(pools.rumor_rooms)
        meta: dict[str, Any] = {"topic": t.fact.key}
        if slot in off_topic:  # near the topic, about a fact no document states
            claim = t.fact.side_claim
            meta.update(role="off_topic", injected=True, contradicts=[])
        else:
            claim = t.fact.claim.replace("{v}", t.rumor_value)
            meta.update(role="rumor", value=t.rumor_value, injected=True,
                        contradicts=_topic_doc_ids(t, split))  # fmt: skip
        text = r.choice(pools.rumor).format(claim=claim, short=pools.team_short[t.fact.team])
        docs.append([_doc_record(
            f"{channel}-{room}-{slot:03d}", 1, _at(base, day, r), None, channel,
            _authority(channel, cfg, r), r.choice(pools.names), text, meta,
        )])  # fmt: skip

    docs.sort(key=lambda versions: (versions[0]["valid_from"], versions[0]["doc_id"]))
    corpus = [rec for versions in docs for rec in versions]
    queries = _queries(cfg, topics, base, n_days, window)
    _self_check(corpus, queries, topics)
    return corpus, queries


def _topic_doc_ids(t: _Topic, split: bool) -> list[str]:
    """Every document stating the topic's fact: the policy's and the runbook's (all their
    version-documents when ``split``)."""
    ids = _series_ids(_slug(t.fact.title), len(t.values), split)
    if t.has_dependent:
        ids += _series_ids(_slug(t.fact.dep_title), len(t.dep_values), split)
    return ids


def _in_force(times: Sequence[datetime], at: datetime) -> int:
    """Index of the version valid at ``at`` (the last one that started at or before it)."""
    k = max(i for i, t in enumerate(times) if t <= at)
    return k


def _current_time(
    cfg: PolicySynthConfig, t: _Topic, base: datetime, n_days: int, window: int,
    r: random.Random, timing: random.Random,
) -> datetime:  # fmt: skip
    """When a `current` query about ``t`` is asked, by ``cfg.query_timing``: ``quiet`` draws
    from the query stream ``r`` (as before the axis existed), the others from ``timing``."""
    if cfg.query_timing == "quiet":
        return _at(base, r.randint(window, n_days - 1), r)
    if cfg.query_timing == "uniform":
        return _at(base, timing.randint(t.days[0] + 1, n_days - 1), timing)
    # after_change: within after_change_days after a revision (version 1 if there is none),
    # while that version is in force and before the end of the span
    k = timing.randrange(1, len(t.times)) if len(t.times) > 1 else 0
    until = t.times[k + 1] if k + 1 < len(t.times) else base + timedelta(days=n_days)
    room = min(timedelta(days=cfg.after_change_days), until - t.times[k] - timedelta(minutes=1))
    return t.times[k] + timedelta(minutes=timing.randint(1, room // timedelta(minutes=1)))


def _queries(
    cfg: PolicySynthConfig, topics: list[_Topic], base: datetime, n_days: int, window: int
) -> list[dict[str, Any]]:
    r = _rng(cfg, "queries")
    timing = _rng(cfg, "query-timing")
    split = cfg.supersession == "documents"
    specs: list[tuple[str, _Topic, int, datetime]] = []  # kind, topic, template, asked_at
    template_order = {t.slot: r.sample(range(len(t.fact.questions)), len(t.fact.questions))
                      for t in topics}  # fmt: skip
    slot_order = r.sample(topics, len(topics))
    for i in range(cfg.n_current_queries if topics else 0):
        t = slot_order[i % len(topics)]
        template = template_order[t.slot][(i // len(topics)) % len(t.fact.questions)]
        asked = _current_time(cfg, t, base, n_days, window, r, timing)
        specs.append(("current", t, template, asked))

    intervals = [(t, k) for t in topics for k in range(len(t.values) - 1)]
    chosen = r.sample(intervals, min(cfg.n_as_of_queries, len(intervals)))
    while len(chosen) < cfg.n_as_of_queries and intervals:
        chosen.append(r.choice(intervals))
    for t, k in chosen:
        day = r.randint(t.days[k] + 1, t.days[k + 1] - 1)
        specs.append(("as_of", t, r.randrange(len(t.fact.questions)), _at(base, day, r)))

    dependents = [t for t in topics if t.has_dependent]
    dep_order = {t.slot: r.sample(range(len(t.fact.dep_questions)),
                                  len(t.fact.dep_questions)) for t in dependents}  # fmt: skip
    for i in range(cfg.n_dependent_queries if dependents else 0):
        t = dependents[i % len(dependents)]
        template = dep_order[t.slot][(i // len(dependents)) % len(t.fact.dep_questions)]
        day = r.randint(t.dep_times[0].toordinal() - base.toordinal() + 1, n_days - 1)
        specs.append(("dependent", t, template, _at(base, day, r)))

    window_start = base + timedelta(days=window)
    rows = []
    for kind, t, template, asked in specs:
        k = _in_force(t.times, asked)
        fact = t.fact
        # the policy's documents that exist at `asked` (all its versions when split)
        policy_ids = _series_ids(_slug(fact.title), k + 1, split)
        dep_id = _slug(fact.dep_title)
        meta: dict[str, Any] = {
            "topic": fact.key, "template": template, "policy_doc": policy_ids[-1],
            "version_in_force": k + 1,
        }  # fmt: skip
        if kind == "dependent":
            question = fact.dep_questions[template]
            j = _in_force(t.dep_times, asked)
            dep_ids = _series_ids(dep_id, j + 1, split)
            doc_ids = [*dep_ids, *policy_ids]
            meta.update(dependent_doc=dep_ids[-1], dependent_states=t.dep_values[j])
        else:
            question = fact.questions[template]
            doc_ids = list(policy_ids)
            if t.has_dependent and t.dep_times[0] <= asked:
                doc_ids += _series_ids(dep_id, _in_force(t.dep_times, asked) + 1, split)
        if kind == "as_of" or (kind == "dependent" and asked < window_start):
            question = f"As of {_date_phrase(asked)}, {_lower_first(question)}"
        rows.append({
            "kind": kind, "asked_at": asked, "text": question, "doc_ids": doc_ids,
            "answer": t.values[k], "stale_answers": list(t.values[:k]), "meta": meta,
            "_slot": t.slot,
        })  # fmt: skip
    rows.sort(key=lambda q: (q["asked_at"], q["_slot"], q["kind"], q["text"]))
    width = max(3, len(str(len(rows))))
    out = []
    for i, q in enumerate(rows, start=1):
        del q["_slot"]
        q["asked_at"] = _iso(q["asked_at"])
        out.append({"id": f"q{i:0{width}d}", **q})
    return out


def _self_check(
    corpus: list[dict[str, Any]], queries: list[dict[str, Any]], topics: list[_Topic]
) -> None:
    """Every text states exactly the value it is meant to (off-topic chunks none), and no
    other topic's value; every query's documents exist when it is asked and state its answer;
    every document a rumor contradicts exists."""
    all_values = {v for t in topics for v in [*t.values, t.rumor_value]}

    def states(text: str) -> set[str]:  # the substring test is a fast necessary condition
        flat = normalise(text)
        return {v for v in all_values if normalise(v) in flat and contains_answer(text, v)}

    by_doc: dict[str, list[dict[str, Any]]] = {}
    for rec in corpus:
        by_doc.setdefault(rec["doc_id"], []).append(rec)
        stated = states(rec["text"])
        meant = {rec["meta"]["value"]} if "value" in rec["meta"] else set()
        if stated != meant:
            raise RuntimeError(f"{rec['doc_id']} v{rec['version']} states {sorted(stated)}")
        for chunk in chunk_text(rec["text"]):
            if len(chunk.text) >= 1000:
                raise RuntimeError(f"{rec['doc_id']}: paragraph of {len(chunk.text)} chars")
    for rec in corpus:
        unknown = set(rec["meta"].get("contradicts", [])) - by_doc.keys()
        if unknown:
            raise RuntimeError(f"{rec['doc_id']} contradicts unknown {sorted(unknown)}")
    for q in queries:
        stated = states(q["text"])
        if stated:
            raise RuntimeError(f"query {q['id']} states {sorted(stated)}")
        live = [rec for d in q["doc_ids"] for rec in by_doc[d]
                if rec["valid_from"] <= q["asked_at"]]  # fmt: skip
        if set(q["doc_ids"]) - {rec["doc_id"] for rec in live}:
            raise RuntimeError(f"query {q['id']} names a document that does not exist yet")
        if not any(contains_answer(rec["text"], q["answer"]) for rec in live):
            raise RuntimeError(f"query {q['id']}: no document in doc_ids states the answer")


# --- counting and statistics --------------------------------------------------------------


def _field(rec: Any, name: str) -> Any:
    return rec[name] if isinstance(rec, Mapping) else getattr(rec, name)


def _by_doc(corpus: Iterable[Any]) -> dict[str, list[Any]]:
    groups: dict[str, list[Any]] = {}
    for rec in corpus:
        groups.setdefault(_field(rec, "doc_id"), []).append(rec)
    for versions in groups.values():
        versions.sort(key=lambda rec: _field(rec, "version"))
    return groups


def count_vectors(corpus: Iterable[Any]) -> int:
    """Vectors a store holds after ingesting ``corpus`` with surgical updates: every chunk of
    a document's first version, plus the re-embedded chunks of each later version."""
    total = 0
    for versions in _by_doc(corpus).values():
        chunks = chunk_text(_field(versions[0], "text"))
        total += len(chunks)
        for rec in versions[1:]:
            new = chunk_text(_field(rec, "text"))
            total += diff_chunks(chunks, new).n_reembedded
            chunks = new
    return total


def corpus_stats(corpus: Sequence[Mapping[str, Any]], queries: Sequence[Mapping[str, Any]]
                 ) -> dict[str, Any]:  # fmt: skip
    """The statistics the dataset card reports."""
    groups = _by_doc(corpus)
    roles: dict[str, int] = {}
    for versions in groups.values():
        role = versions[0]["meta"].get("role", "?")
        roles[role] = roles.get(role, 0) + 1
    chunks = {d: len(chunk_text(v[0]["text"])) for d, v in groups.items()}
    edited = [d for d, v in groups.items() if len(v) > 1]
    edits = [(d, len(chunk_text(rec["text"]))) for d, v in groups.items() for rec in v[1:]]
    reembedded = [
        diff_chunks(chunk_text(a["text"]), chunk_text(b["text"])).n_reembedded
        for v in groups.values() for a, b in zip(v, v[1:], strict=False)
    ]  # fmt: skip
    per_topic: dict[str, int] = {}  # policy versions per topic, whatever the supersession
    for rec in corpus:
        if rec["meta"].get("role") == "policy":
            per_topic[rec["meta"]["topic"]] = per_topic.get(rec["meta"]["topic"], 0) + 1
    policy_versions = list(per_topic.values())
    end = max(_ts(rec["valid_from"]) for rec in corpus)

    def corr(recs: list[Mapping[str, Any]]) -> float | None:
        if len(recs) < 3:
            return None
        age = np.array([(end - _ts(rec["valid_from"])) / 86400.0 for rec in recs])
        auth = np.array([float(rec["authority"]) for rec in recs])
        if age.std() == 0 or auth.std() == 0:
            return None
        return round(float(np.corrcoef(age, auth)[0, 1]), 3)

    kinds: dict[str, int] = {}
    for q in queries:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    policies = [rec for rec in corpus if rec["meta"].get("role") == "policy"]
    starts: dict[str, list[float]] = {}
    for rec in policies:
        starts.setdefault(rec["meta"]["topic"], []).append(_ts(rec["valid_from"]))
    first = {topic: min(ts) for topic, ts in starts.items()}
    revisions = [rec for rec in policies if _ts(rec["valid_from"]) > first[rec["meta"]["topic"]]]
    since: list[float] = []  # days from the answer's policy version to each `current` query
    mid_churn = 0  # `current` queries asked before a later revision of their topic
    for q in queries:
        if q["kind"] == "current":
            at = _ts(q["asked_at"])
            ts = starts[q["meta"]["topic"]]
            since.append((at - max(t for t in ts if t <= at)) / 86400.0)
            mid_churn += any(t > at for t in ts)
    return {
        "documents": len(groups),
        "documents_by_role": dict(sorted(roles.items())),
        "versions": len(corpus),
        "vectors": count_vectors(corpus),
        "chunks_per_document_mean": round(float(np.mean(list(chunks.values()))), 3),
        "chunks_per_edited_document_mean": round(
            float(np.mean([chunks[d] for d in edited])), 3) if edited else None,
        "chunks_per_edit_mean": round(float(np.mean([n for _, n in edits])), 3)
        if edits else None,
        "reembedded_per_edit_mean": round(float(np.mean(reembedded)), 3) if reembedded else None,
        "versions_per_policy": {str(n): policy_versions.count(n)
                                for n in sorted(set(policy_versions))},
        "versions_per_policy_mean": round(float(np.mean(policy_versions)), 3),
        "injected": sum(1 for rec in corpus if rec["meta"].get("injected") is True),
        "injected_off_topic": roles.get("off_topic", 0),
        "policy_revisions_via_lower_channel": sum(
            1 for rec in revisions if rec["source_type"] not in ("policy_doc", "technical_doc")),
        "policy_revisions": len(revisions),
        "corr_age_authority_policies": corr(policies),
        "corr_age_authority_all_genuine": corr(
            [rec for rec in corpus if rec["meta"].get("injected") is not True]),
        "corr_age_authority_all": corr(list(corpus)),
        "queries": len(queries),
        "queries_by_kind": dict(sorted(kinds.items())),
        "queries_with_stale_answers": sum(1 for q in queries if q["stale_answers"]),
        "current_days_since_change": {
            "min": round(min(since), 1), "median": round(float(np.median(since)), 1),
            "max": round(max(since), 1),
        } if since else None,
        "current_queries_before_a_later_revision": mid_churn,
        "dependent_queries_where_runbook_is_stale": sum(
            1 for q in queries if q["kind"] == "dependent"
            and q["meta"]["dependent_states"] != q["answer"]),
    }  # fmt: skip


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


# --- writing and command line -------------------------------------------------------------


def write_policy_synth(cfg: PolicySynthConfig, out_dir: str | Path) -> Path:
    """Generate the corpus for ``cfg`` and write it with ``write_dataset``."""
    from experiments.data.dataset import write_dataset

    return write_dataset(generate(cfg), out_dir)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.data.policy_synth", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--seed", type=int, default=PolicySynthConfig.seed)
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument(
        "--contradiction-rate", type=float, default=PolicySynthConfig.contradiction_rate
    )
    parser.add_argument("--stats", action="store_true", help="print statistics as JSON")
    args = parser.parse_args(argv)
    cfg = PolicySynthConfig(seed=args.seed, contradiction_rate=args.contradiction_rate)
    try:
        out = write_policy_synth(cfg, args.out)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.stats:
        corpus, queries = generate(cfg)
        stats = {"config": asdict(cfg), **corpus_stats(corpus, queries)}
        print(json.dumps(stats, indent=2))
    else:
        print(out)
    return 0


@dataclass
class PolicySynthDatasetConfig(PolicySynthConfig):
    """The paper's synthetic corpus, generated (seeded) into the results directory."""

    kind: str = field(default="policy_synth")


def _plain(cfg: PolicySynthDatasetConfig) -> PolicySynthConfig:
    return PolicySynthConfig(**{f.name: getattr(cfg, f.name) for f in fields(PolicySynthConfig)})


DATASET = DatasetKind("policy_synth", PolicySynthDatasetConfig,
                      lambda cfg, out, base: write_policy_synth(_plain(cfg), out / "dataset"),
                      lambda cfg: validate(_plain(cfg)))


if __name__ == "__main__":
    raise SystemExit(main())
