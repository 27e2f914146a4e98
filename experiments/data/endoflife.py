"""Graded questions from the real history of software release cycles on endoflife.date, no LLM.

The raw history (``datasets/endoflife/versions.jsonl.gz``: 8,978 product/cycle documents,
46,564 versions, 2019-2026; ``removed.jsonl``: cycles that left the site) becomes one corpus
record per version, valid from its commit time to the next version's (a removed cycle's last
version ends when it was removed). A *fact* is one field of one cycle (its latest release,
end of life, end of active support, ...) that takes two or more values. Questions name the
cycle as the page in force then titles it ("When does Django 4.2 reach end of life?", "As
of 3 May 2024, what was the latest release of Python 3.12?"); the answer is the field's line
in force at the asked time ("End of life: 2026-04-30"), the stale answers its earlier lines.
The shared deriver (:mod:`experiments.data.deriver`) draws the times, selects under the caps
and splits by document. ``datasets/endoflife/README.md`` is the card; the default is a
documented subset of the cycles (``max_documents``), so that a run takes minutes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from experiments.data.dataset import DatasetError, write_dataset
from experiments.data.deriver import (
    Candidate,
    Fact,
    QuestionsConfig,
    candidate_pool,
    command,
    corpus_records,
    date_phrase,
    horizon,
    keep_documents,
    query_records,
    raw_path,
    read_versions,
    select,
    validate_common,
    version_times,
)
from experiments.data.history import gives_away, line_facts, subject_of
from experiments.data.registry import DatasetKind

#: field -> (its line's label in a version's text, question now, question as of a date);
#: {s} is the cycle as the version in force titles it (the text's first line)
QUESTIONS: dict[str, tuple[str, str, str]] = {
    "latest": ("Latest version", "What is the latest release of {s}?",
               "As of {date}, what was the latest release of {s}?"),
    "latestReleaseDate": ("Latest version released on",
                          "When was the latest release of {s} published?",
                          "As of {date}, when had the latest release of {s} been published?"),
    "eol": ("End of life", "When does {s} reach end of life?",
            "As of {date}, when was {s} due to reach end of life?"),
    "eoas": ("End of active support", "When does active support for {s} end?",
             "As of {date}, when was active support for {s} due to end?"),
    "eoes": ("End of extended support", "When does extended support for {s} end?",
             "As of {date}, when was extended support for {s} due to end?"),
    "releaseDate": ("Release date", "When was {s} released?",
                    "As of {date}, when was {s} said to have been released?"),
    "lts": ("LTS", "Is {s} a long-term support (LTS) release?",
            "As of {date}, was {s} a long-term support (LTS) release?"),
    "codename": ("Codename", "What is the codename of {s}?",
                 "As of {date}, what was the codename of {s}?"),
}  # fmt: skip

DEFAULT_FIELDS = ["latest", "eol", "eoas", "eoes", "releaseDate", "lts", "codename"]


@dataclass
class EndoflifeConfig(QuestionsConfig):
    """Knobs of the derivation; the defaults give the subset the dataset card describes."""

    kind: str = "endoflife"
    max_documents: int | None = 600  # a documented subset (cycles with facts first)
    max_queries: int = 300
    max_queries_per_document: int = 3
    max_queries_per_fact: int = 3
    fields: list[str] = field(default_factory=lambda: list(DEFAULT_FIELDS))  # asked about


def validate(cfg: EndoflifeConfig) -> None:
    """Raise ``ValueError`` (one line, naming the key) for the first bad field."""
    if cfg.kind != "endoflife":
        raise ValueError(f"kind must be 'endoflife', got {cfg.kind!r}")
    validate_common(cfg)
    fields = list(cfg.fields)
    if not fields or any(f not in QUESTIONS for f in fields) or len(set(fields)) < len(fields):
        raise ValueError(f"fields must be a non-empty list of distinct fields from "
                         f"{', '.join(QUESTIONS)}, got {fields}")  # fmt: skip


def cycle_facts(doc_id: str, versions: Sequence[dict[str, Any]], names: Sequence[str]
                ) -> list[Fact]:  # fmt: skip
    """One fact per asked field whose line (``End of life: ...``) takes two or more values
    over the cycle's versions, or appears, and grades unambiguously
    (:func:`~experiments.data.history.line_facts`); the fact is named by the field."""
    out = []
    for name in names:
        for fact in line_facts(doc_id, versions, [QUESTIONS[name][0]]):
            fact.fact_id, fact.meta = name, {"field": name}
            out.append(fact)
    return out


def _question(c: Candidate, versions: Sequence[dict[str, Any]]) -> str | None:
    """The question, naming the cycle as the version in force titles it; None (dropped) when
    the title states one of the fact's values ("the codename of macOS 10.10 (Yosemite)", "the
    latest release of Looker 24.4" when it is 24.4): the question would give it away."""
    _, now, then = QUESTIONS[c.fact.fact_id]
    subject = subject_of(versions[c.version])
    if gives_away(subject, c.fact):
        return None
    if c.timing == "as_of":
        return then.format(s=subject, date=date_phrase(c.asked_at))
    return now.format(s=subject)


def removed_at(path: str | Path) -> dict[str, datetime]:
    """When each removed cycle left the site (``removed.jsonl`` beside the history)."""
    out = {}
    path = Path(path)
    if not path.is_file():
        return out
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rec = json.loads(line)
                out[rec["doc_id"]] = datetime.fromisoformat(rec["removed_at"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise DatasetError(f"{path.name}:{number}: not a removal record: "
                                   f"{type(e).__name__}: {e}") from None  # fmt: skip
    return out


def generate(cfg: EndoflifeConfig, *, source: str | Path | None = None
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """Corpus and query records for ``cfg`` (``source``: another raw file, for tests; its
    ``removed.jsonl`` is read from beside it)."""
    validate(cfg)
    path = Path(raw_path("endoflife") if source is None else source)
    docs = read_versions(path)
    gone = removed_at(path.parent / "removed.jsonl")
    end = horizon(docs, cfg.after_change_days)
    facts = {d: cycle_facts(d, vs, cfg.fields) for d, vs in docs.items()}
    docs = keep_documents(docs, {d for d, f in facts.items() if f}, cfg.max_documents)
    ends = {d: t for d, t in gone.items() if d in docs
            and t > version_times(docs[d])[-1]}  # fmt: skip
    pool = candidate_pool(docs, facts, end, cfg, ends)
    queries = query_records(select(pool, cfg),
                            lambda c: _question(c, docs[c.fact.doc_id]), cfg, "eol")
    return corpus_records(docs, "technical_doc", ends,
                          title=lambda d, v: subject_of(v)), queries


def write(cfg: EndoflifeConfig, out_dir: str | Path, *, source: str | Path | None = None
          ) -> Path:  # fmt: skip
    """Derive the dataset for ``cfg`` and write ``corpus.jsonl``/``queries.jsonl`` into
    ``out_dir`` (with ``write_dataset``); returns ``out_dir``."""
    return write_dataset(generate(cfg, source=source), out_dir)


def main(argv: Sequence[str] | None = None) -> int:
    return command("experiments.data.endoflife", __doc__.splitlines()[0],
                   EndoflifeConfig, generate, ["field"], argv)


DATASET = DatasetKind("endoflife", EndoflifeConfig,
                      lambda cfg, out, base: write(cfg, out / "dataset"), validate)


if __name__ == "__main__":
    raise SystemExit(main())
