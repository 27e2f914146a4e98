"""Graded questions from the real edit history of GitHub's site policies, derived without an LLM.

The raw history (``datasets/site_policy/versions.jsonl.gz``: 96 documents, 1,214 versions)
becomes one corpus record per version, valid from its commit time to the next version's. A
*fact* is a value (a date, a duration, an amount of money, a percentage) in one sentence that
changes between versions while the rest of the sentence stays (or changes only a little).
Every fact gives cloze questions ("In the GitHub Privacy Statement, what fills the blank:
'... within ___ after ...'?") asked at times drawn from three regimes (``after_change``,
``long_after``, ``as_of``); the answer is the value in force at the asked time, the stale
answers the fact's earlier values. ``datasets/site_policy/README.md`` documents the design
and the statistics of the default output.

The facts are this module's; the questions, their times, the selection and the split are
the shared deriver's (:mod:`experiments.data.deriver`). Everything is deterministic: the
same config gives byte-identical files.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from experiments.data.dataset import write_dataset
from experiments.data.deriver import (
    MONTHS,
    Candidate,
    Fact,
    QuestionsConfig,
    VersionTexts,
    candidate_pool,
    command,
    consistent,
    corpus_records,
    date_phrase,
    horizon,
    keep_documents,
    query_records,
    raw_path,
    read_versions,
    select,
    validate_common,
)
from experiments.data.registry import DatasetKind
from experiments.protocol.answers import normalise

# --- configuration ------------------------------------------------------------------------

@dataclass
class SitePolicyConfig(QuestionsConfig):
    """Knobs of the derivation; the defaults give the corpus the dataset card describes."""

    kind: str = "site_policy"
    min_similarity: float = 0.7  # how alike a reworded sentence must be to carry a fact on


def validate(cfg: SitePolicyConfig) -> None:
    """Raise ``ValueError`` (one line, naming the key) for the first bad field."""
    if cfg.kind != "site_policy":
        raise ValueError(f"kind must be 'site_policy', got {cfg.kind!r}")
    validate_common(cfg)
    if not 0.0 < cfg.min_similarity <= 1.0:
        raise ValueError(f"min_similarity must be in (0, 1], got {cfg.min_similarity!r}")


# --- values in policy text ----------------------------------------------------------------

_MONTH_RE = "(?:" + "|".join(m.capitalize() for m in MONTHS) + ")"
_SMALL = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
          "fourteen fifteen sixteen seventeen eighteen nineteen").split()  # fmt: skip
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_WORDNUM_VALUE = {w: i for i, w in enumerate(_SMALL)}
_WORDNUM_VALUE.update({w: 20 + 10 * i for i, w in enumerate(_TENS)})
_WORDNUM_VALUE["hundred"] = 100
_WORDNUM_RE = (rf"(?:(?:{'|'.join(_TENS)})(?:-(?:{'|'.join(_SMALL[1:10])}))?"
               rf"|{'|'.join(sorted(_SMALL + ['hundred'], key=len, reverse=True))})")  # fmt: skip
_NUM_RE = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_UNIT_RE = (r"(?:(?:business|calendar|working)[ -]days?|days?|hours?|minutes?|seconds?|weeks?"
            r"|months?|years?|percent|MB|GB|KB|TB)")  # fmt: skip
_VALUE = re.compile(
    rf"(?P<date1>\b{_MONTH_RE}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b)"
    rf"|(?P<date2>\b\d{{1,2}}\s+{_MONTH_RE},?\s+\d{{4}}\b)"
    rf"|(?P<date3>\b\d{{4}}-\d{{2}}-\d{{2}}\b)"
    rf"|(?P<money>(?:\bU\.?S\.?\s?)?\$\s?{_NUM_RE}(?:\s?USD\b)?|\b{_NUM_RE}\s?USD\b)"
    rf"|(?P<wq>\b{_WORDNUM_RE}\s*\(\s*(?P<wqn>{_NUM_RE})\s*\)[\s-]*(?P<wqu>{_UNIT_RE})\b)"
    rf"|(?P<wp>\b{_WORDNUM_RE}[\s-]+(?P<wpu>{_UNIT_RE})\s*\(\s*(?P<wpn>{_NUM_RE})\s*%?\s*\))"
    rf"|(?P<q>\b(?P<qn>{_NUM_RE}|{_WORDNUM_RE})(?:\s+|-)(?P<qu>{_UNIT_RE})\b)"
    rf"|(?P<pct>\b{_NUM_RE}\s?%)",
    re.IGNORECASE,
)


_DIGIT_OR_DOLLAR = re.compile(r"[\d$]")
_NOT_LETTER = re.compile(r"[^a-z]+")


def _maybe_value(sentence: str) -> bool:
    """A fast necessary condition for ``_VALUE`` to match: a digit, a ``$`` or a number word."""
    return _DIGIT_OR_DOLLAR.search(sentence) is not None or not _WORDNUM_VALUE.keys().isdisjoint(
        _NOT_LETTER.split(sentence.casefold()))


@dataclass(frozen=True)
class Value:
    """One value found in a sentence: its span, its kind and a key equal for equal values."""

    start: int
    end: int
    kind: str  # date, money, percent, size (MB, GB, ...), duration (other units)
    key: str


def _number(text: str) -> str:
    text = text.casefold().replace(",", "")
    if text in _WORDNUM_VALUE:
        return str(_WORDNUM_VALUE[text])
    if "-" in text:
        tens, ones = text.split("-", 1)
        return str(_WORDNUM_VALUE[tens] + _WORDNUM_VALUE[ones])
    n = float(text)
    return str(int(n)) if n == int(n) else repr(n)


def _unit(text: str) -> str:
    u = re.sub(r"[\s-]+", " ", text.casefold())
    if u in ("percent", "%"):
        return "percent"
    if u in ("mb", "gb", "kb", "tb"):
        return u
    return u[:-1] if u.endswith("s") else u


def _date_key(m: re.Match[str]) -> str | None:
    text = m.group(0)
    try:
        if m.group("date3"):
            return datetime.strptime(text, "%Y-%m-%d").date().isoformat()
        words = re.findall(r"[A-Za-z]+|\d+", text)
        month = next(MONTHS.index(w.casefold()) + 1 for w in words if w.isalpha()
                     and w.casefold() in MONTHS)  # fmt: skip
        day, year = (int(w) for w in words if w.isdigit())
        return datetime(year, month, day).date().isoformat()
    except (ValueError, StopIteration):
        return None


@lru_cache(maxsize=65536)
def find_values(sentence: str) -> tuple[Value, ...]:
    """Dates, amounts of money, percentages and numbers with a unit in ``sentence``."""
    if not _maybe_value(sentence):
        return ()
    out = []
    for m in _VALUE.finditer(sentence):
        if m.group("date1") or m.group("date2") or m.group("date3"):
            key = _date_key(m)
            if key is None:
                continue
            out.append(Value(m.start(), m.end(), "date", key))
            continue
        if m.group("money"):
            number = re.search(_NUM_RE, m.group(0)).group(0)  # type: ignore[union-attr]
            out.append(Value(m.start(), m.end(), "money", "usd:" + _number(number)))
            continue
        for tag in ("wq", "wp", "q"):
            if m.group(tag):
                number, unit = m.group(tag + "n"), _unit(m.group(tag + "u"))
                break
        else:  # pct
            number, unit = m.group(0).rstrip("% "), "percent"
        kind = _UNIT_KINDS.get(unit, "duration")
        out.append(Value(m.start(), m.end(), kind, f"{unit}:{_number(number)}"))
    return tuple(out)


_UNIT_KINDS = {"percent": "percent", "kb": "size", "mb": "size", "gb": "size", "tb": "size"}


# --- sentences and their lineage across versions ------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Segment:
    """A sentence (or list item, table row, heading) of one version, inside one chunk."""

    text: str
    chunk: int
    values: tuple[Value, ...]

    @property
    def template(self) -> str:
        out, pos = [], 0
        for v in self.values:
            out.append(self.text[pos : v.start])
            out.append("\x00")
            pos = v.end
        out.append(self.text[pos:])
        return "".join(out)


def segments(chunks: Sequence[str]) -> list[Segment]:
    """A version's chunks (``chunk_text``'s texts) cut into lines, the lines into sentences."""
    return [Segment(sentence, index, values) for index, chunk in enumerate(chunks)
            for sentence, values in _sentences(chunk)]  # fmt: skip


@lru_cache(maxsize=65536)
def _sentences(chunk: str) -> tuple[tuple[str, tuple[Value, ...]], ...]:
    """(sentence, its values) for each line of a chunk cut at sentence ends (cached: most
    chunks recur unchanged in many versions)."""
    return tuple((sentence, find_values(sentence)) for line in chunk.split("\n")
                 for sentence in _SENTENCE_END.split(line.strip()) if sentence)  # fmt: skip


def _pair_replaced(old: Sequence[Segment], new: Sequence[Segment], min_similarity: float
                   ) -> list[tuple[int, int]]:  # fmt: skip
    """Pairs (i, j) of sentences that carry the same kinds of values and whose templates
    (values blanked, Markdown marks removed, case-folded) are at least ``min_similarity``
    alike (difflib's ratio over words); greedy, best first, each sentence used once."""
    scored = []
    for i, a in enumerate(old):
        if not a.values:
            continue
        for j, b in enumerate(new):
            if [v.kind for v in b.values] != [v.kind for v in a.values]:
                continue
            sm = difflib.SequenceMatcher(None, _plain(a.template).casefold().split(),
                                         _plain(b.template).casefold().split(), autojunk=False)
            if sm.real_quick_ratio() < min_similarity or sm.quick_ratio() < min_similarity:
                continue
            ratio = sm.ratio()
            if ratio >= min_similarity:
                scored.append((-ratio, i, j))
    scored.sort()
    used_i: set[int] = set()
    used_j: set[int] = set()
    pairs = []
    for _, i, j in scored:
        if i not in used_i and j not in used_j:
            used_i.add(i)
            used_j.add(j)
            pairs.append((i, j))
    return pairs


def _links(prev: Sequence[Segment], segs: Sequence[Segment], min_similarity: float
           ) -> dict[int, int]:  # fmt: skip
    """``{old index: new index}`` for the sentences with values that carry on from one
    version to the next: unchanged in place (difflib's equal blocks), unchanged but moved,
    then reworded (:func:`_pair_replaced` over what is left)."""
    sm = difflib.SequenceMatcher(None, [s.text for s in prev], [s.text for s in segs],
                                 autojunk=False)  # fmt: skip
    links: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            links.update((i, j) for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
                         if prev[i].values)  # fmt: skip
    linked = set(links.values())
    old = [i for i, s in enumerate(prev) if s.values and i not in links]
    new = [j for j, s in enumerate(segs) if s.values and j not in linked]
    by_text: dict[str, list[int]] = {}
    for j in new:
        by_text.setdefault(segs[j].text, []).append(j)
    for i in old:
        same = by_text.get(prev[i].text)
        if same:
            links[i] = same.pop(0)
    linked = set(links.values())
    old = [i for i in old if i not in links]
    new = [j for j in new if j not in linked]
    for a, b in _pair_replaced([prev[i] for i in old], [segs[j] for j in new], min_similarity):
        links[old[a]] = new[b]
    return links


def _lineages(versions: Sequence[Sequence[Segment]], min_similarity: float
              ) -> list[dict[int, int]]:  # fmt: skip
    """Chains of one sentence through consecutive versions: ``{version index: segment
    index}``, for sentences that carry values. A sentence kept (in place or moved) or
    reworded (within ``min_similarity``, same kinds of values) continues its chain; any
    other sentence with values starts a new one."""
    chains: list[dict[int, int]] = []
    current: dict[int, int] = {}  # segment index in the previous version -> chain
    for k, segs in enumerate(versions):
        nxt: dict[int, int] = {}
        if k > 0:
            for i, j in _links(versions[k - 1], segs, min_similarity).items():
                nxt[j] = current[i]
        for j, seg in enumerate(segs):
            if seg.values and j not in nxt:
                nxt[j] = len(chains)
                chains.append({})
        for j, c in nxt.items():
            chains[c][k] = j
        current = nxt
    return chains


# --- answer strings -----------------------------------------------------------------------

#: (words before, words after) the value an answer string may take, tried in this order
_CONTEXT_LEVELS = ((0, 0), (1, 0), (0, 1), (1, 1), (2, 1), (1, 2), (2, 2), (3, 3), (4, 4),
                   (6, 6))  # fmt: skip


def _with_context(text: str, start: int, end: int, before: int, after: int) -> str:
    """``text[start:end]`` grown by ``before`` whitespace-separated words to the left and
    ``after`` to the right (a word the value starts or ends inside counts as one)."""
    if before:
        starts = [m.start() for m in re.finditer(r"\S+", text) if m.start() < start]
        start = starts[-before] if len(starts) >= before else 0
    if after:
        ends = [m.end() for m in re.finditer(r"\S+", text) if m.end() > end]
        end = ends[after - 1] if len(ends) >= after else len(text)
    return text[start:end]


# --- site policy: facts and questions -----------------------------------------------------

_TITLE = re.compile(r"^title:\s*(.+?)\s*$", re.MULTILINE)
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_CLOZE_WORDS = 20  # words kept on each side of the blank


def title_of(text: str, doc_id: str) -> str:
    """The front matter's ``title:``, else the document id."""
    m = _TITLE.search(text[:2000]) if text.startswith("---") else None
    return m.group(1).strip("'\"") if m else doc_id


def cloze(sentence: str, start: int, end: int) -> str:
    """The sentence with ``[start, end)`` blanked as ``___``, Markdown emphasis, code marks
    and link targets removed, at most ``_CLOZE_WORDS`` words either side of the blank."""
    left = _plain(sentence[:start]).split()
    right = _plain(sentence[end:]).split()
    cut_left = len(left) > _CLOZE_WORDS
    cut_right = len(right) > _CLOZE_WORDS
    left = left[-_CLOZE_WORDS:]
    right = right[:_CLOZE_WORDS]
    if left and left[0] in ("*", "-", "|"):
        left = left[1:]
    text = " ".join([*(["…"] if cut_left else []), *left, "___", *right,
                     *(["…"] if cut_right else [])])  # fmt: skip
    return text.replace("___ ,", "___,").replace("___ .", "___.").rstrip(" |")


def _plain(text: str) -> str:
    text = _LINK.sub(r"\1", text)
    return re.sub(r"\*\*|__|`|\\", "", text)


def site_policy_facts(doc_id: str, texts: Sequence[str], min_similarity: float) -> list[Fact]:
    """Facts of one document: a sentence chain with exactly one value slot that changes,
    whose answer strings (the value, grown by a few words where needed) grade unambiguously
    (:func:`consistent`). Facts whose cloze would be identical are dropped."""
    checker = VersionTexts(texts)
    segs = [segments(chunks) for chunks in checker.chunks]
    facts: list[Fact] = []
    for chain in _lineages(segs, min_similarity):
        if len(chain) < 2:
            continue
        ks = sorted(chain)
        n_values = len(segs[ks[0]][chain[ks[0]]].values)
        varying = [s for s in range(n_values)
                   if len({segs[k][chain[k]].values[s].key for k in ks}) > 1]  # fmt: skip
        if len(varying) != 1:
            continue
        slot = varying[0]
        keys: list[str | None] = [None] * len(texts)
        for k in ks:
            keys[k] = segs[k][chain[k]].values[slot].key
        changes = sum(1 for a, b in zip(ks, ks[1:], strict=False) if keys[a] != keys[b])
        if not changes:
            continue
        for before, after in _CONTEXT_LEVELS:
            forms: list[str | None] = [None] * len(texts)
            for k in ks:
                seg = segs[k][chain[k]]
                v = seg.values[slot]
                forms[k] = _with_context(seg.text, v.start, v.end, before, after).strip()
            first = ks[0]
            fact = Fact(doc_id, f"v{first + 1}s{chain[first]}", keys, forms)
            if consistent(fact, checker):
                break
        else:
            continue
        if any(_label_only(checker.chunks[k][segs[k][chain[k]].chunk], forms[k]) for k in ks):
            continue
        fact.wording = [None] * len(texts)
        for k in ks:
            seg = segs[k][chain[k]]
            fact.wording[k] = cloze(seg.text, seg.values[slot].start, seg.values[slot].end)
        last = segs[ks[-1]][chain[ks[-1]]]
        value = last.values[slot]
        fact.meta = {
            "value_type": value.kind,
            "cloze": cloze(last.text, value.start, value.end),
            "context_words": [before, after],
        }
        facts.append(fact)
    clozes = Counter(normalise(f.meta["cloze"]) for f in facts)
    return [f for f in facts if clozes[normalise(f.meta["cloze"])] == 1]


#: a gold chunk with fewer words than this besides its answer is only a label and a value
MIN_CONTEXT_WORDS = 6
_WORD = re.compile(r"[^\W_]+")


def _label_only(chunk: str, answer: str) -> bool:
    """Whether the chunk stating ``answer`` says little else (``Effective date: **May 25,
    2018**``): such a chunk names no subject, and every policy has one like it."""
    rest = normalise(chunk).replace(normalise(answer), " ", 1)
    return len(_WORD.findall(rest)) < MIN_CONTEXT_WORDS


def _question(c: Candidate, versions: Sequence[dict[str, Any]]) -> str:
    """The cloze question in the words of the version in force: its title and its sentence."""
    title = title_of(versions[c.version]["text"], c.fact.doc_id)
    blank = c.fact.wording[c.version] or c.fact.meta["cloze"]
    if c.timing == "as_of":
        return (f"As of {date_phrase(c.asked_at)}, in the {title}, what filled the blank: "
                f"\"{blank}\"?")  # fmt: skip
    return f"In the {title}, what fills the blank: \"{blank}\"?"


def generate(cfg: SitePolicyConfig, *, source: str | Path | None = None
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """Corpus and query records for ``cfg`` (``source``: another raw file, for tests)."""
    validate(cfg)
    docs = read_versions(raw_path("site_policy") if source is None else source)
    end = horizon(docs, cfg.after_change_days)
    facts = {d: site_policy_facts(d, [v["text"] for v in vs], cfg.min_similarity)
             for d, vs in docs.items()}  # fmt: skip
    docs = keep_documents(docs, {d for d, f in facts.items() if f}, cfg.max_documents)
    pool = candidate_pool(docs, facts, end, cfg)
    chosen = select(pool, cfg)
    queries = query_records(chosen, lambda c: _question(c, docs[c.fact.doc_id]), cfg, "sp")
    return corpus_records(docs, "policy_doc", title=lambda d, v: title_of(v["text"], d)), queries


def write(cfg: SitePolicyConfig, out_dir: str | Path, *, source: str | Path | None = None
          ) -> Path:  # fmt: skip
    """Derive the dataset for ``cfg`` and write ``corpus.jsonl``/``queries.jsonl`` into
    ``out_dir`` (with ``write_dataset``); returns ``out_dir``."""
    return write_dataset(generate(cfg, source=source), out_dir)


def main(argv: Sequence[str] | None = None) -> int:
    return command("experiments.data.site_policy", __doc__.splitlines()[0],
                   SitePolicyConfig, generate, ["value_type"], argv)


DATASET = DatasetKind("site_policy", SitePolicyConfig,
                      lambda cfg, out, base: write(cfg, out / "dataset"), validate)


if __name__ == "__main__":
    raise SystemExit(main())
