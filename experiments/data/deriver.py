"""One deriver for any version history: versions with times in, time-conditioned questions out.

A *history* is a set of documents, each a list of versions in order with a commit time
(``versions.jsonl.gz``: ``doc_id``, ``version``, ``committed_at``, ``text``, optionally
``fields``, ``commit``, ``path``). A version is in force from its time to the next one's. A
*fact* is one slot of one document (a header field, a value in a sentence) through the
versions: its value in each version (``keys``, equal for equal values) and the answer string
as the version writes it (``forms``). From the facts the deriver draws questions asked at
times from three regimes (``after_change``: just after a change; ``long_after``: long after
it; ``as_of``: about a past date): the answer is the fact's value in force at the asked time,
the stale answers its earlier values. It selects under caps (per document, per fact), splits
development and test by document, and writes the harness's corpus and query records.

The real corpora use it with their own facts and wording: :mod:`experiments.data.site_policy`
(values in policy sentences), :mod:`experiments.data.peps` and
:mod:`experiments.data.endoflife` (header fields). Everything is deterministic: the same
config gives byte-identical files.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from experiments.data.dataset import DatasetError, format_time, repair_times, write_dataset
from experiments.protocol.answers import contains_answer, normalise
from smartvector.chunking import chunk_text

# --- configuration ------------------------------------------------------------------------

SPLITS = ("all", "dev", "test")
TIMINGS = ("after_change", "long_after", "as_of")


@dataclass
class QuestionsConfig:
    """What the real corpora's derivations share: the seed, the document split, the timing
    mix and the caps. Usable as a Hydra structured config (through its subclasses)."""

    kind: str = ""
    seed: int = 0  # draws asked_at times and breaks ties in the selection
    split: str = "all"  # which queries to keep: all, dev or test (by document)
    dev_fraction: float = 0.5  # share of documents (by a stable hash of the id) in dev
    after_change_share: float = 0.4  # the timing mix (normalised; a share of 0 turns it off)
    long_after_share: float = 0.3
    as_of_share: float = 0.3
    after_change_days: int = 30  # after_change: asked within N days after the last change
    long_after_days: int = 180  # long_after: asked >= M days after it, before the next one
    max_queries: int = 300  # in total, before the split filter
    max_queries_per_document: int = 40
    max_queries_per_fact: int = 3  # no fact gives more than three questions
    max_documents: int | None = None  # keep only N documents (those with facts first)


def validate_common(cfg: Any) -> None:
    """Checks shared by both real corpora's configs (seed, split, timing mix, caps)."""
    if type(cfg.seed) is not int:
        raise ValueError(f"seed must be an integer, got {cfg.seed!r}")
    if cfg.split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {cfg.split!r}")
    if not 0.0 <= cfg.dev_fraction <= 1.0:
        raise ValueError(f"dev_fraction must be in [0, 1], got {cfg.dev_fraction!r}")
    shares = [getattr(cfg, f"{t}_share") for t in TIMINGS]
    for t, share in zip(TIMINGS, shares, strict=True):
        if not 0.0 <= share <= 1e9:  # also rejects NaN
            raise ValueError(f"{t}_share must be a number >= 0, got {share!r}")
    if sum(shares) <= 0:
        raise ValueError("after_change_share, long_after_share and as_of_share must not all "
                         "be 0")
    for name in ("after_change_days", "long_after_days", "max_queries",
                 "max_queries_per_document", "max_queries_per_fact"):  # fmt: skip
        value = getattr(cfg, name)
        if type(value) is not int or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if cfg.max_documents is not None and (type(cfg.max_documents) is not int
                                          or cfg.max_documents < 1):  # fmt: skip
        raise ValueError(f"max_documents must be null or an integer >= 1, got "
                         f"{cfg.max_documents!r}")  # fmt: skip


#: English month names, lower case (dates are written in English whatever the locale)
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")  # fmt: skip


@dataclass
class Fact:
    """A value through a document's versions: ``keys[i]`` (equal for equal values) and
    ``forms[i]`` (the answer string as written in version ``i``), None where absent.
    ``appearing_changes``: a value that appears where the version before had none counts as
    a change (from no value)."""

    doc_id: str
    fact_id: str
    keys: list[str | None]
    forms: list[str | None]
    meta: dict[str, Any] = field(default_factory=dict)
    appearing_changes: bool = False
    #: per version, the words a question quotes from it (a cloze), where it quotes any: a
    #: question is worded from the version in force when it is asked
    wording: list[str | None] = field(default_factory=list)


def format_only(values: set[str]) -> bool:
    """Whether some of a fact's distinct values differ only in format (``2.7 and 3.1`` and
    ``2.7, 3.1``; ``2016-4-23`` and ``2016-04-23``): the same words and numbers once
    punctuation, joining words and leading zeros are dropped. Such a change is not a new
    value, and a retriever returning either line gives the same answer."""

    def tokens(value: str) -> tuple[str, ...]:
        words = re.findall(r"[^\W_]+", value)
        return tuple(w.lstrip("0") or "0" for w in words if w not in ("and", "or"))

    return len({tokens(v) for v in values}) < len(values)


class VersionTexts:
    """A document's version texts, chunked and normalised once, for answer-string checks."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.chunks = [[c.text for c in chunk_text(t)] for t in texts]
        self.norm = [[normalise(c) for c in chunks] for chunks in self.chunks]
        self.whole = ["\n".join(n) for n in self.norm]

    def count(self, k: int, answer: str) -> int:
        """Chunks of version ``k`` that contain ``answer`` (as the grader matches)."""
        needle = normalise(answer)
        if not needle or needle not in self.whole[k]:
            return 0
        return sum(1 for c, n in zip(self.chunks[k], self.norm[k], strict=True)
                   if needle in n and contains_answer(c, answer))  # fmt: skip


def consistent(fact: Fact, texts: VersionTexts) -> bool:
    """Whether the fact's answer strings grade unambiguously in its own document: each
    version's string lies in exactly one of its chunks, and no string occurs in a version
    where the fact has another value (or none) or in two chunks of one version."""
    by_form: dict[str, str] = {}
    for key, form in zip(fact.keys, fact.forms, strict=True):
        if form is None:
            continue
        seen = by_form.setdefault(normalise(form), key)
        if seen != key:
            return False  # one string for two values
    for k, form in enumerate(fact.forms):
        if form is not None and texts.count(k, form) != 1:
            return False
    for form, key in by_form.items():
        for k, other in enumerate(fact.keys):
            if fact.forms[k] is not None and normalise(fact.forms[k]) == form:
                continue  # checked above
            n = texts.count(k, form)
            if n > 1 or (n == 1 and other != key):
                return False
    return True


# --- shared: raw files, times, timing regimes, selection, split ---------------------------


def raw_path(name: str) -> Path:
    """``datasets/<name>/versions.jsonl.gz`` in this repository."""
    return Path(__file__).resolve().parents[2] / "datasets" / name / "versions.jsonl.gz"


def read_versions(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Raw versions (JSON lines, plain or gzipped) grouped by doc id (in order of first
    appearance), sorted by version. Each needs ``doc_id``, ``version``, ``committed_at`` and
    ``text``; ``commit`` and ``path`` default to empty."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: raw version history not found (it ships with the "
                           "repository: restore it from git)")  # fmt: skip
    opener = gzip.open if path.suffix == ".gz" else open
    docs: dict[str, list[dict[str, Any]]] = {}
    with opener(path, "rt", encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                missing = [k for k in ("doc_id", "version", "committed_at", "text")
                           if k not in rec]  # fmt: skip
                if missing:
                    raise KeyError(missing[0])
                rec.setdefault("commit", "")
                rec.setdefault("path", "")
                docs.setdefault(str(rec["doc_id"]), []).append(rec)
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise DatasetError(f"{path.name}:{number}: not a version record (needs doc_id, "
                                   f"version, committed_at, text): {type(e).__name__}: {e}"
                                   ) from None  # fmt: skip
    for versions in docs.values():
        versions.sort(key=lambda r: r["version"])
    return docs


def version_times(versions: Sequence[dict[str, Any]]) -> list[datetime]:
    """``committed_at`` of each version, repaired as the loader repairs them
    (:func:`experiments.data.dataset.repair_times`), in UTC."""
    return repair_times([datetime.fromisoformat(v["committed_at"]) for v in versions])


def horizon(docs: dict[str, list[dict[str, Any]]], days: int) -> datetime:
    """End of the open last validity: the latest time in the history plus ``days``."""
    return max(t for vs in docs.values() for t in version_times(vs)) + timedelta(days=days)


def doc_split(doc_id: str, dev_fraction: float) -> str:
    """``dev`` or ``test`` by a stable hash of the document id (no seed: fixed across seeds)."""
    h = int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big") / 2**64
    return "dev" if h < dev_fraction else "test"


def _rng(*parts: Any) -> random.Random:
    digest = hashlib.sha256(":".join(map(str, parts)).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _hash(*parts: Any) -> str:
    return hashlib.sha256(":".join(map(str, parts)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Run:
    """Consecutive versions ``first..last`` in which a fact keeps one value, in force over
    ``[start, end)``; ``changed`` if the last earlier value differs (or, for a fact with
    ``appearing_changes``, if the version just before had another value or none)."""

    index: int
    key: str
    first: int
    last: int
    start: datetime
    end: datetime
    changed: bool


def runs(fact: Fact, times: Sequence[datetime], end: datetime) -> list[Run]:
    """The fact's runs of one value; a version without the fact ends a run."""
    out: list[Run] = []
    k, n = 0, len(fact.keys)
    previous: str | None = None
    while k < n:
        key = fact.keys[k]
        if key is None:
            previous = None
            k += 1
            continue
        last = k
        while last + 1 < n and fact.keys[last + 1] == key:
            last += 1
        stop = times[last + 1] if last + 1 < n else end
        if fact.appearing_changes:
            changed = k > 0 and fact.keys[k - 1] != key
        else:
            changed = previous is not None and previous != key
        out.append(Run(len(out), key, k, last, times[k], stop, changed))
        previous = key
        k = last + 1
    return out


@dataclass
class Candidate:
    """A possible query: a fact, the run in force, the timing regime and when it is asked."""

    fact: Fact
    run: Run
    timing: str
    asked_at: datetime
    version: int  # index of the version in force at asked_at
    answer: str
    stale: list[str]
    later: list[str]
    priority: str = ""


def _dedupe(forms: Iterable[str]) -> list[str]:
    seen: dict[str, str] = {}
    for f in forms:
        seen.setdefault(normalise(f), f)
    return list(seen.values())


def candidates(fact: Fact, times: Sequence[datetime], end: datetime, cfg: Any
               ) -> list[Candidate]:  # fmt: skip
    """Every (run, timing) of one fact with its drawn asked_at, answer and stale answers.

    ``after_change``: within ``after_change_days`` after a run's start (a change), before its
    end. ``long_after``: at least ``long_after_days`` after that start, before its end.
    ``as_of``: noon (UTC) of a whole day inside a run that a later, different value
    replaced. Times are drawn from a generator seeded by (seed, document, fact, run, timing).
    """
    fact_runs = runs(fact, times, end)
    out = []
    for run in fact_runs:
        windows: dict[str, tuple[datetime, datetime] | None] = {t: None for t in TIMINGS}
        if run.changed:
            near = min(run.start + timedelta(days=cfg.after_change_days), run.end)
            windows["after_change"] = (run.start, near)
            far = run.start + timedelta(days=cfg.long_after_days)
            if far < run.end:
                windows["long_after"] = (far, run.end)
        if any(fact.keys[k] not in (None, run.key) for k in range(run.last + 1, len(fact.keys))):
            first_day = _ceil_day(run.start)
            last_day = _floor_day(run.end) - timedelta(days=1)
            if first_day <= last_day:
                windows["as_of"] = (first_day, last_day)
        for timing, window in windows.items():
            if window is None:
                continue
            rng = _rng(cfg.seed, fact.doc_id, fact.fact_id, run.index, timing)
            lo, hi = window
            if timing == "as_of":
                days = (hi - lo).days
                asked = lo + timedelta(days=rng.randint(0, days), hours=12)
            else:
                span = int((hi - lo).total_seconds())
                if span < 2:
                    continue
                asked = lo + timedelta(seconds=rng.randint(1, span - 1))
            version = max(k for k in range(run.first, run.last + 1) if times[k] <= asked)
            earlier = [fact.forms[k] for k in range(run.first)
                       if fact.keys[k] is not None and fact.keys[k] != run.key]  # fmt: skip
            later = [fact.forms[k] for k in range(run.last + 1, len(fact.keys))
                     if fact.keys[k] is not None and fact.keys[k] != run.key]  # fmt: skip
            out.append(Candidate(fact, run, timing, asked, version, fact.forms[version],
                                 _dedupe(earlier), _dedupe(later),
                                 _hash(cfg.seed, fact.doc_id, fact.fact_id, run.index,
                                       timing)))  # fmt: skip
    return out


def candidate_pool(docs: dict[str, list[dict[str, Any]]], facts: dict[str, list[Fact]],
                   end: datetime, cfg: Any, ends: dict[str, datetime] | None = None
                   ) -> list[Candidate]:  # fmt: skip
    """Every candidate of every document's facts; a document's last run ends at ``end`` or,
    if earlier, at its time in ``ends`` (when it left the source)."""
    pool: list[Candidate] = []
    for doc_id, versions in docs.items():
        times = version_times(versions)
        stop = min(end, ends[doc_id]) if ends and doc_id in ends else end
        for fact in facts[doc_id]:
            pool.extend(candidates(fact, times, stop, cfg))
    return pool


def _ceil_day(t: datetime) -> datetime:
    day = t.replace(hour=0, minute=0, second=0, microsecond=0)
    return day if day == t else day + timedelta(days=1)


def _floor_day(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


def select(pool: Sequence[Candidate], cfg: Any) -> list[Candidate]:
    """Up to ``max_queries`` candidates in the configured timing mix, at most
    ``max_queries_per_document`` per document and ``max_queries_per_fact`` per fact.

    Within a timing, candidates are taken spread out: first every fact's first candidate
    (documents' first facts first), then every fact's second, and so on, ties broken by a
    seeded hash. Timings take turns so each stays near its share of what is taken; a timing
    that runs out leaves its turns to the others.
    """
    shares = {t: getattr(cfg, f"{t}_share") for t in TIMINGS}
    queues: dict[str, list[Candidate]] = {}
    for timing in TIMINGS:
        mine = sorted((c for c in pool if c.timing == timing), key=lambda c: c.priority)
        fact_rank: Counter[tuple[str, str]] = Counter()
        doc_facts: dict[str, dict[str, int]] = {}
        keyed = []
        for c in mine:
            fk = (c.fact.doc_id, c.fact.fact_id)
            facts = doc_facts.setdefault(c.fact.doc_id, {})
            facts.setdefault(c.fact.fact_id, len(facts))
            keyed.append(((fact_rank[fk], facts[c.fact.fact_id], c.priority), c))
            fact_rank[fk] += 1
        queues[timing] = [c for _, c in sorted(keyed, key=lambda kc: kc[0])]
    taken: Counter[str] = Counter()
    per_doc: Counter[str] = Counter()
    per_fact: Counter[tuple[str, str]] = Counter()
    chosen: list[Candidate] = []
    position = dict.fromkeys(TIMINGS, 0)
    while len(chosen) < cfg.max_queries:
        live = [t for t in TIMINGS if shares[t] > 0 and position[t] < len(queues[t])]
        if not live:
            break
        timing = min(live, key=lambda t: ((taken[t] + 1) / shares[t], TIMINGS.index(t)))
        c = queues[timing][position[timing]]
        position[timing] += 1
        fk = (c.fact.doc_id, c.fact.fact_id)
        if per_doc[c.fact.doc_id] >= cfg.max_queries_per_document:
            continue
        if per_fact[fk] >= cfg.max_queries_per_fact:
            continue
        chosen.append(c)
        taken[timing] += 1
        per_doc[c.fact.doc_id] += 1
        per_fact[fk] += 1
    return chosen


def date_phrase(t: datetime) -> str:
    """``2 July 2019`` (day month year, English month names whatever the locale)."""
    return f"{t.day} {MONTHS[t.month - 1].capitalize()} {t.year}"


def query_records(chosen: Sequence[Candidate], question: Callable[[Candidate], str | None],
                  cfg: Any, prefix: str) -> list[dict[str, Any]]:  # fmt: skip
    """Query records for the chosen candidates, ids ``<prefix>-0001`` in asked_at order, then
    kept for ``cfg.split``; a candidate whose question would state one of the fact's values
    is dropped (``question`` may also return None to drop one)."""
    rows = []
    for c in chosen:
        text = question(c)
        if text is None or any(contains_answer(text, f) for f in c.fact.forms if f):
            continue
        meta: dict[str, Any] = {
            "timing": c.timing,
            "split": doc_split(c.fact.doc_id, cfg.dev_fraction),
            "fact": c.fact.fact_id,
            **c.fact.meta,
            "answer_version": c.version + 1,
            "changed_at": format_time(c.run.start) if c.run.changed else None,
            "days_since_change": round((c.asked_at - c.run.start).total_seconds() / 86400, 2),
            "later_answers": c.later,
        }
        rows.append({
            "kind": "as_of" if c.timing == "as_of" else "current",
            "asked_at": c.asked_at, "text": text, "doc_ids": [c.fact.doc_id],
            "answer": c.answer, "stale_answers": c.stale, "meta": meta,
        })  # fmt: skip
    rows.sort(key=lambda r: (r["asked_at"], r["doc_ids"][0], r["meta"]["fact"],
                             r["meta"]["timing"]))  # fmt: skip
    out = []
    for i, r in enumerate(rows, start=1):
        r["asked_at"] = format_time(r["asked_at"])
        rec = {"id": f"{prefix}-{i:04d}", **r}
        if cfg.split == "all" or r["meta"]["split"] == cfg.split:
            out.append(rec)
    return out


def corpus_records(docs: dict[str, list[dict[str, Any]]], source_type: str,
                   ends: dict[str, datetime] | None = None,
                   title: Callable[[str, dict[str, Any]], str | None] | None = None
                   ) -> list[dict[str, Any]]:  # fmt: skip
    """One record per version: ``valid_from`` the repaired commit time, ``valid_to`` the next
    version's (for a document's last version, its time in ``ends``, if any: when it left the
    source), ``commit``/``path``/``committed_at`` (raw) in ``meta``, and ``meta.title`` the
    version's title as ``title(doc_id, version)`` gives it (the chunk header of
    ``protocol.chunk_context=title``)."""
    out = []
    for doc_id, versions in docs.items():
        times = version_times(versions)
        for k, v in enumerate(versions):
            meta: dict[str, Any] = {"commit": v["commit"], "path": v["path"],
                                    "committed_at": v["committed_at"]}  # fmt: skip
            if times[k] != datetime.fromisoformat(v["committed_at"]):
                meta["time_repaired"] = True
            name = title(doc_id, v) if title is not None else None
            if name:
                meta["title"] = name
            rec: dict[str, Any] = {"doc_id": doc_id, "version": k + 1,
                                   "valid_from": format_time(times[k])}  # fmt: skip
            if k + 1 < len(versions):
                rec["valid_to"] = format_time(times[k + 1])
            elif ends and doc_id in ends and ends[doc_id] > times[k]:
                rec["valid_to"] = format_time(ends[doc_id])
            rec.update(source_type=source_type, text=v["text"], meta=meta)
            out.append(rec)
    return out


def keep_documents(docs: dict[str, list[dict[str, Any]]], with_facts: set[str],
                   limit: int | None) -> dict[str, list[dict[str, Any]]]:  # fmt: skip
    """At most ``limit`` documents, those with facts first (by a stable hash of the id), in
    their original order."""
    if limit is None or limit >= len(docs):
        return docs
    # (salted: the split hashes the bare id, and a cut by that hash would keep one split)
    ranked = sorted(docs, key=lambda d: (d not in with_facts, _hash("keep", d)))
    keep = set(ranked[:limit])
    return {d: vs for d, vs in docs.items() if d in keep}


def stats(corpus: Sequence[dict[str, Any]], queries: Sequence[dict[str, Any]],
          extra_keys: Sequence[str] = ()) -> dict[str, Any]:  # fmt: skip
    """Statistics the dataset cards report (chunks as ``chunk_text`` cuts them)."""
    from experiments.data.policy_synth import count_vectors

    def count(key: Callable[[dict[str, Any]], Any]) -> dict[str, int]:
        return dict(sorted(Counter(str(key(q)) for q in queries).items()))

    docs = {r["doc_id"] for r in corpus}
    out: dict[str, Any] = {
        "documents": len(docs),
        "versions": len(corpus),
        "versions_time_repaired": sum(1 for r in corpus if r["meta"].get("time_repaired")),
        "chunks": sum(len(chunk_text(r["text"])) for r in corpus),
        "vectors_surgical": count_vectors(corpus),
        "queries": len(queries),
        "documents_with_queries": len({q["doc_ids"][0] for q in queries}),
        "facts_with_queries": len({(q["doc_ids"][0], q["meta"]["fact"]) for q in queries}),
        "queries_by_kind": count(lambda q: q["kind"]),
        "queries_by_timing": count(lambda q: q["meta"]["timing"]),
        "queries_by_split": count(lambda q: q["meta"]["split"]),
        "documents_by_split": dict(sorted(Counter(
            split for _, split in {(q["doc_ids"][0], q["meta"]["split"]) for q in queries}
        ).items())),
        "queries_with_stale_answers": sum(1 for q in queries if q["stale_answers"]),
        **_elsewhere(corpus, queries),
    }  # fmt: skip
    for key in extra_keys:
        out[f"queries_by_{key}"] = count(lambda q, key=key: q["meta"].get(key))
    return out


def _elsewhere(corpus: Sequence[dict[str, Any]], queries: Sequence[dict[str, Any]]
               ) -> dict[str, int]:  # fmt: skip
    """Queries whose answer (or a stale answer) some chunk of *another* document states: the
    shared grader calls such a chunk wrong (or stale) though it is about something else."""
    chunks: dict[str, dict[str, None]] = {}
    for r in corpus:
        mine = chunks.setdefault(r["doc_id"], {})
        mine.update(dict.fromkeys(c.text for c in chunk_text(r["text"])))
    blobs = {d: normalise("\n".join(cs)) for d, cs in chunks.items()}

    def elsewhere(doc_id: str, answer: str) -> bool:
        needle = normalise(answer)
        return any(needle in blob and any(contains_answer(c, answer) for c in chunks[d])
                   for d, blob in blobs.items() if d != doc_id)  # fmt: skip

    return {
        "queries_answer_in_other_documents": sum(
            1 for q in queries if elsewhere(q["doc_ids"][0], q["answer"])),
        "queries_stale_answer_in_other_documents": sum(
            1 for q in queries if any(elsewhere(q["doc_ids"][0], s) for s in q["stale_answers"])),
    }  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser, config: type) -> None:
    """The command-line options both real corpora share."""
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--seed", type=int, default=config.seed)
    parser.add_argument("--split", choices=SPLITS, default=config.split)
    parser.add_argument("--max-documents", type=int, default=config.max_documents)
    parser.add_argument("--max-queries", type=int, default=config.max_queries)
    parser.add_argument("--stats", action="store_true", help="print statistics as JSON")
    parser.add_argument("--source", default=None,
                        help="raw versions file (default: the one under datasets/)")


def command(module: str, description: str, config: type, generate_fn: Callable[..., Any],
            extra_keys: Sequence[str], argv: Sequence[str] | None = None) -> int:
    """``python -m <module>`` of a corpus: the shared options, then :func:`run_cli`."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    add_arguments(parser, config)
    return run_cli(parser.parse_args(argv), config, generate_fn, extra_keys)


def run_cli(args: argparse.Namespace, config: type, generate_fn: Callable[..., Any],
            extra_keys: Sequence[str]) -> int:  # fmt: skip
    """Write the dataset the options describe; print its directory or statistics."""
    cfg = config(seed=args.seed, split=args.split, max_documents=args.max_documents,
                 max_queries=args.max_queries)  # fmt: skip
    try:
        corpus, queries = generate_fn(cfg, source=args.source)
        out = write_dataset((corpus, queries), args.out)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.stats:
        print(json.dumps({"config": asdict(cfg), **stats(corpus, queries, extra_keys)},
                         indent=2))  # fmt: skip
    else:
        print(out)
    return 0
