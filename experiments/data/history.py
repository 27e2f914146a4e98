"""Time-conditioned questions from your own version history, with the shared deriver.

A history is a ``.jsonl`` or ``.jsonl.gz`` file, one version per line (``doc_id``,
``version``, ``committed_at`` with its UTC offset, ``text``; ``commit``/``path``
optional), in which each version's text starts with a line naming its subject and states its
facts as ``Label: value`` lines (as the endoflife and PEP histories do)::

    python -m experiments.data.history --history my_versions.jsonl.gz --out my_dataset
    python -m experiments.run dataset=history dataset.path=my_versions.jsonl.gz

A fact is one label of one document whose value changes; questions ("What is the <label> of
<subject>?", "As of <date>, what was the <label> of <subject>?") are asked just after a
change, long after it and about a past date; the answer is the line in force at the asked
time, the stale answers the label's earlier lines. ``--fields`` limits the labels asked
about. ``README.md`` ("Bring your own version history") says more.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.data.dataset import write_dataset
from experiments.data.deriver import (
    Candidate,
    Fact,
    QuestionsConfig,
    VersionTexts,
    add_arguments,
    candidate_pool,
    consistent,
    corpus_records,
    date_phrase,
    format_only,
    horizon,
    keep_documents,
    query_records,
    read_versions,
    run_cli,
    select,
    validate_common,
)
from experiments.data.registry import DatasetKind
from experiments.protocol.answers import contains_answer, normalise

_LINE = re.compile(r"^([^:\n]{1,60}): (.+)$", re.MULTILINE)


@dataclass
class HistoryConfig(QuestionsConfig):
    """Your history file and the deriver's knobs (``max_queries_per_fact`` 3 by default)."""

    kind: str = "history"
    path: str = ""  # the versions file (.jsonl or .jsonl.gz)
    fields: list[str] = field(default_factory=list)  # labels asked about; empty: every one


def validate(cfg: HistoryConfig) -> None:
    """Raise ``ValueError`` (one line, naming the key) for the first bad field."""
    if not cfg.path:
        raise ValueError("dataset.path must name your history file (.jsonl or .jsonl.gz)")
    if not Path(cfg.path).is_file():
        raise ValueError(f"dataset.path {cfg.path!r}: file not found")
    validate_common(cfg)


def subject_of(version: dict[str, Any]) -> str:
    """The subject a version is about: its text's first line."""
    return version["text"].split("\n", 1)[0].strip()


def line_of(text: str, label: str) -> str | None:
    """The text's ``<label>: value`` line (after its first line), or None."""
    for line in text.split("\n")[1:]:
        if line.startswith(f"{label}: "):
            return line.strip()
    return None


def line_facts(doc_id: str, versions: Sequence[dict[str, Any]], labels: Sequence[str]
               ) -> list[Fact]:  # fmt: skip
    """One fact per label whose line takes two or more values over the versions (or appears
    where the version before had none) and grades unambiguously in the document."""
    texts = VersionTexts([v["text"] for v in versions])
    out = []
    for label in labels:
        forms = [line_of(v["text"], label) for v in versions]
        keys = [None if f is None else normalise(f) for f in forms]
        appears = any(a is None and b is not None for a, b in zip(keys, keys[1:], strict=False))
        values = {k for k in keys if k is not None}
        if (len(values) < 2 and not appears) or format_only(values):
            continue
        fact = Fact(doc_id, label, keys, forms, {"field": label}, True)
        if consistent(fact, texts):
            out.append(fact)
    return out


def gives_away(subject: str, fact: Fact) -> bool:
    """Whether the subject's name states one of the fact's values (the question would)."""
    values = {f.split(": ", 1)[1] for f in fact.forms if f is not None}
    return any(contains_answer(subject, v) for v in values)


def _question(c: Candidate, versions: Sequence[dict[str, Any]]) -> str | None:
    subject = subject_of(versions[c.version])
    if gives_away(subject, c.fact):
        return None
    label = c.fact.fact_id
    if c.timing == "as_of":
        return f"As of {date_phrase(c.asked_at)}, what was the {label} of {subject}?"
    return f"What is the {label} of {subject}?"


def generate(cfg: HistoryConfig, *, source: str | Path | None = None
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """Corpus and query records for ``cfg`` (``source`` overrides ``cfg.path``)."""
    if source is not None:
        cfg = HistoryConfig(**{**cfg.__dict__, "path": str(source)})
    validate(cfg)
    docs = read_versions(cfg.path)
    end = horizon(docs, cfg.after_change_days)
    facts = {}
    for d, vs in docs.items():
        labels = list(cfg.fields) or sorted({m.group(1) for v in vs
                                             for m in _LINE.finditer(v["text"].split("\n", 1)[-1])})
        facts[d] = line_facts(d, vs, labels)
    docs = keep_documents(docs, {d for d, f in facts.items() if f}, cfg.max_documents)
    pool = candidate_pool(docs, facts, end, cfg)
    queries = query_records(select(pool, cfg), lambda c: _question(c, docs[c.fact.doc_id]),
                            cfg, "q")
    return corpus_records(docs, "unknown", title=lambda d, v: subject_of(v)), queries


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.data.history", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--history", required=True, help="your versions file")
    parser.add_argument("--fields", nargs="*", default=[], help="labels to ask about")
    add_arguments(parser, HistoryConfig)
    args = parser.parse_args(argv)

    def make(cfg: HistoryConfig, source: str | None = None):
        return generate(HistoryConfig(**{**cfg.__dict__, "fields": list(args.fields)}),
                        source=source or args.history)

    return run_cli(args, HistoryConfig, make, ["field"])


DATASET = DatasetKind("history", HistoryConfig,
                      lambda cfg, out, base: write_dataset(
                          generate(HistoryConfig(**{**cfg.__dict__,
                                                    "path": str(base / cfg.path)})),
                          out / "dataset"), validate)


if __name__ == "__main__":
    raise SystemExit(main())
