"""Graded questions from the real header history of Python Enhancement Proposals, no LLM.

The raw history (``datasets/peps/versions.jsonl.gz``: 742 PEPs, 5,160 versions, one version
per change of a header field) becomes one corpus record per version, valid from its commit
time to the next version's. A *fact* is one header field of one PEP (``Status``,
``Python-Version``, ``Type``, ``Title``, ...) that takes two or more values over the PEP's
history. Questions are asked at times drawn from the shared deriver's timing regimes
(:mod:`experiments.data.deriver`: ``after_change``, ``long_after``, ``as_of``) and name the
PEP by its number and title ("What is the status of PEP 563 (Postponed Evaluation of
Annotations)?"); the answer is the header line in force at the asked time (e.g. "Status:
Accepted"), the stale answers are the field's earlier lines.
``datasets/peps/README.md`` documents the design and the statistics of the default output.
"""

from __future__ import annotations

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
    candidate_pool,
    command,
    consistent,
    corpus_records,
    date_phrase,
    format_only,
    horizon,
    keep_documents,
    query_records,
    raw_path,
    read_versions,
    select,
    validate_common,
)
from experiments.data.registry import DatasetKind
from experiments.protocol.answers import contains_answer, normalise
from smartvector.chunking import chunk_text

#: field -> (question asked now, question asked as of a date); {n} is the PEP number
QUESTIONS: dict[str, tuple[str, str]] = {
    "Status": ("What is the status of PEP {n}?",
               "As of {date}, what was the status of PEP {n}?"),
    "Python-Version": ("Which Python version is PEP {n} targeted at?",
                       "As of {date}, which Python version was PEP {n} targeted at?"),
    "Type": ("What type of PEP is PEP {n}?",
             "As of {date}, what type of PEP was PEP {n}?"),
    "Title": ("What is the title of PEP {n}?",
              "As of {date}, what was the title of PEP {n}?"),
    "Superseded-By": ("Which PEP supersedes PEP {n}?",
                      "As of {date}, which PEP superseded PEP {n}?"),
    "Replaces": ("Which PEP does PEP {n} replace?",
                 "As of {date}, which PEP did PEP {n} replace?"),
    "Requires": ("Which PEPs does PEP {n} require?",
                 "As of {date}, which PEPs did PEP {n} require?"),
    "Discussions-To": ("Where is PEP {n} discussed?",
                       "As of {date}, where was PEP {n} discussed?"),
    "Resolution": ("Where is the resolution of PEP {n} recorded?",
                   "As of {date}, where was the resolution of PEP {n} recorded?"),
    "BDFL-Delegate": ("Who is the BDFL-Delegate for PEP {n}?",
                      "As of {date}, who was the BDFL-Delegate for PEP {n}?"),
    "PEP-Delegate": ("Who is the PEP-Delegate for PEP {n}?",
                     "As of {date}, who was the PEP-Delegate for PEP {n}?"),
}  # fmt: skip

DEFAULT_FIELDS = ["Status", "Python-Version", "Type", "Title", "Superseded-By", "Replaces"]


@dataclass
class PepsConfig(QuestionsConfig):
    """Knobs of the derivation; the defaults give the corpus the dataset card describes."""

    kind: str = "peps"
    max_queries_per_document: int = 2
    max_queries_per_fact: int = 2
    fields: list[str] = field(default_factory=lambda: list(DEFAULT_FIELDS))  # asked about
    appearing_changes: bool = True  # a field added later (Superseded-By: 600) is a change


def validate(cfg: PepsConfig) -> None:
    """Raise ``ValueError`` (one line, naming the key) for the first bad field."""
    if cfg.kind != "peps":
        raise ValueError(f"kind must be 'peps', got {cfg.kind!r}")
    validate_common(cfg)
    if type(cfg.appearing_changes) is not bool:
        raise ValueError(f"appearing_changes must be true or false, got {cfg.appearing_changes!r}")
    fields = list(cfg.fields)
    if not fields or any(f not in QUESTIONS for f in fields) or len(set(fields)) < len(fields):
        raise ValueError(f"fields must be a non-empty list of distinct header fields from "
                         f"{', '.join(QUESTIONS)}, got {fields}")  # fmt: skip


def _field(fields: dict[str, str], name: str) -> tuple[str, str] | None:
    """``(key as written, value)`` of a header field, matching the key case-insensitively
    (the history has ``Python-version`` and ``Superseded-by`` too); None if absent/empty."""
    for key, value in fields.items():
        if key.casefold() == name.casefold() and value.strip():
            return key, value.strip()
    return None


def pep_facts(doc_id: str, versions: Sequence[dict[str, Any]], names: Sequence[str],
              texts: VersionTexts | None = None, appearing: bool = True) -> list[Fact]:  # fmt: skip
    """One fact per asked field that changes over the PEP's versions and whose header lines
    grade unambiguously (:func:`consistent`). A field changes if it takes two or more values
    (case-insensitively) or, with ``appearing``, if it appears where the version before had
    none (a Superseded-By added when the PEP is superseded)."""
    texts = texts or VersionTexts([v["text"] for v in versions])
    out = []
    for name in names:
        keys: list[str | None] = []
        forms: list[str | None] = []
        for v in versions:
            found = _field(v["fields"], name)
            keys.append(None if found is None else normalise(found[1]))
            forms.append(None if found is None else f"{found[0]}: {found[1]}")
        appears = appearing and any(a is None and b is not None
                                    for a, b in zip(keys, keys[1:], strict=False))  # fmt: skip
        values = {k for k in keys if k is not None}
        if len(values) < 2 and not appears:
            continue
        if format_only(values):
            continue  # a change of format only ("2.7 and 3.1" -> "2.7, 3.1"): not a new value
        fact = Fact(doc_id, name, keys, forms, {"field": name}, appearing)
        if consistent(fact, texts):
            out.append(fact)
    return out


def _names_subject(text: str, answer: str, number: str, title: str | None) -> bool:
    """Whether the chunk of ``text`` stating ``answer`` also names its PEP (its ``PEP:``
    line or its title): a long header is cut into chunks, and a chunk holding only
    ``Status: Final`` could be any PEP's."""
    for chunk in chunk_text(text):
        if contains_answer(chunk.text, answer):
            return bool(re.search(rf"^PEP:\s*0*{re.escape(number)}\s*$", chunk.text, re.M)) or (
                title is not None and title in chunk.text)
    return False


def _title(doc_id: str, version: dict[str, Any]) -> str:
    """``PEP 563: Postponed Evaluation of Annotations`` (the chunk header)."""
    title = _field(version["fields"], "Title")
    return f"PEP {_number(doc_id)}" + ("" if title is None else f": {title[1]}")


def _number(doc_id: str) -> str:
    digits = doc_id.rsplit("-", 1)[-1]
    return str(int(digits)) if digits.isdigit() else doc_id


def _question(c: Candidate, versions: Sequence[dict[str, Any]]) -> str | None:
    """The question, naming the PEP as a person would: its number and, but for questions
    about the title itself, its title in the version in force ("PEP 563 (Postponed
    Evaluation of Annotations)"). None (dropped) when that title states one of the fact's
    values ("Python 3.8 Release Schedule" for a Python-Version question), or when the chunk
    stating the answer names neither the PEP's number nor its title."""
    now, then = QUESTIONS[c.fact.fact_id]
    n = _number(c.fact.doc_id)
    title = _field(versions[c.version]["fields"], "Title")
    if not _names_subject(versions[c.version]["text"], c.answer, n,
                          None if title is None else title[1]):
        return None
    if c.fact.fact_id != "Title" and title is not None:
        values = {f.split(": ", 1)[1] for f in c.fact.forms if f is not None}
        if any(contains_answer(title[1], v) for v in values):
            return None
        n = f"{n} ({title[1]})"
    if c.timing == "as_of":
        return then.format(n=n, date=date_phrase(c.asked_at))
    return now.format(n=n)


def generate(cfg: PepsConfig, *, source: str | Path | None = None
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """Corpus and query records for ``cfg`` (``source``: another raw file, for tests)."""
    validate(cfg)
    docs = read_versions(raw_path("peps") if source is None else source)
    end = horizon(docs, cfg.after_change_days)
    facts = {d: pep_facts(d, vs, cfg.fields, appearing=cfg.appearing_changes)
             for d, vs in docs.items()}  # fmt: skip
    docs = keep_documents(docs, {d for d, f in facts.items() if f}, cfg.max_documents)
    pool = candidate_pool(docs, facts, end, cfg)
    queries = query_records(select(pool, cfg), lambda c: _question(c, docs[c.fact.doc_id]),
                            cfg, "pep")
    return corpus_records(docs, "technical_doc", title=_title), queries


def write(cfg: PepsConfig, out_dir: str | Path, *, source: str | Path | None = None) -> Path:
    """Derive the dataset for ``cfg`` and write ``corpus.jsonl``/``queries.jsonl`` into
    ``out_dir`` (with ``write_dataset``); returns ``out_dir``."""
    return write_dataset(generate(cfg, source=source), out_dir)


def main(argv: Sequence[str] | None = None) -> int:
    return command("experiments.data.peps", __doc__.splitlines()[0],
                   PepsConfig, generate, ["field"], argv)


DATASET = DatasetKind("peps", PepsConfig, lambda cfg, out, base: write(cfg, out / "dataset"),
                      validate)


if __name__ == "__main__":
    raise SystemExit(main())
