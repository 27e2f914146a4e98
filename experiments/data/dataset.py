"""The one on-disk dataset format every corpus is evaluated through.

A dataset is a directory holding ``corpus.jsonl`` (one line per document version) and
``queries.jsonl`` (one line per query); ``datasets/README.md`` documents every field.
``load_dataset`` validates each line and stops at the first bad one with a one-line
``DatasetError`` ``"<file>:<line>: <what is wrong>"``, except for versions whose times are out
of order within a document, which it repairs (``repair_times``) with one
``OutOfOrderVersionsWarning`` unless ``strict``. ``write_dataset`` writes the canonical
form (fixed field order, ``Z`` times), so load -> write -> load is identical and
write -> load -> write is byte-identical; ``Dataset.fingerprint`` hashes that canonical form.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from experiments.protocol.answers import contains_answer
from smartvector.fileio import atomic_write_bytes
from smartvector.sources import default_authority
from smartvector.timeutil import to_ts

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"

_DOC_FIELDS = (
    "doc_id", "version", "valid_from", "valid_to", "source_type", "authority", "author",
    "depends_on", "text", "meta",
)  # fmt: skip
_QUERY_FIELDS = (
    "id", "kind", "asked_at", "text", "doc_ids", "answer", "stale_answers", "meta",
)  # fmt: skip
_JSON_TYPE = {
    bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
    dict: "object", type(None): "null",
}  # fmt: skip
_SHOWN_IDS = 5

#: how far after its predecessor a version whose time is not after the predecessor's is moved
REPAIR_STEP = timedelta(seconds=1)


#: the largest version number (a 32-bit signed integer, as the stores keep it)
MAX_VERSION = 2**31 - 1
#: the last year a time may fall in (later ones leave no room for the replay's arithmetic)
LAST_YEAR = 9998


class DatasetError(ValueError):
    """A dataset that cannot be loaded; the message is one line, ``"<file>:<line>: ..."``."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None) -> None:
        super().__init__(message.replace("\r", "\\r").replace("\n", "\\n"))
        self.file = file
        self.line = line


class UnanswerableQueryWarning(UserWarning):
    """Some queries were excluded because no version of their documents states the answer."""


class OutOfOrderVersionsWarning(UserWarning):
    """Some versions had times out of order within their document and were repaired."""


class _Bad(Exception):
    """A problem with one record, before the file and line are known."""


@dataclass(frozen=True)
class DocVersion:
    """One version of a document, valid over ``[valid_from, valid_to)`` (UTC)."""

    doc_id: str
    version: int
    text: str
    valid_from: datetime
    valid_to: datetime | None = None
    source_type: str = "unknown"
    authority: float = None  # type: ignore[assignment]  # None: default of source_type
    author: str = ""
    depends_on: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    line: int | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.authority is None:
            object.__setattr__(self, "authority", default_authority(self.source_type))
        object.__setattr__(self, "depends_on", tuple(self.depends_on))

    @property
    def ts(self) -> float:
        """``valid_from`` as POSIX seconds."""
        return to_ts(self.valid_from)

    @property
    def valid_to_ts(self) -> float | None:
        return None if self.valid_to is None else to_ts(self.valid_to)

    @property
    def injected(self) -> bool:
        """True for an injected contradiction (``meta.injected``)."""
        return self.meta.get("injected") is True


@dataclass(frozen=True)
class Query:
    """A question asked at ``asked_at`` whose right answer lives in ``doc_ids``."""

    id: str
    text: str
    asked_at: datetime
    doc_ids: tuple[str, ...]
    answer: str
    stale_answers: tuple[str, ...] = ()
    kind: str = "current"
    meta: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    line: int | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "doc_ids", tuple(self.doc_ids))
        object.__setattr__(self, "stale_answers", tuple(self.stale_answers))

    @property
    def ts(self) -> float:
        """``asked_at`` as POSIX seconds."""
        return to_ts(self.asked_at)


@dataclass
class Dataset:
    """A loaded dataset: ``corpus`` in file order and the answerable ``queries``.

    ``unanswerable`` lists ``(query id, reason)`` for queries left out of ``queries``; the
    queries themselves are kept in ``excluded`` so writing reproduces the files faithfully.
    ``repaired`` lists ``(doc id, version, what was changed)`` for versions whose times the
    loader repaired (``corpus`` holds the repaired times).
    """

    corpus: list[DocVersion]
    queries: list[Query]
    path: Path | None = field(default=None, compare=False)
    unanswerable: list[tuple[str, str]] = field(default_factory=list)
    excluded: list[Query] = field(default_factory=list, repr=False)
    repaired: list[tuple[str, int, str]] = field(default_factory=list, compare=False)

    def doc_ids(self) -> list[str]:
        """Distinct document ids in order of first appearance."""
        return list(dict.fromkeys(d.doc_id for d in self.corpus))

    def versions_of(self, doc_id: str) -> list[DocVersion]:
        """All versions of one document in file (= version) order; KeyError if unknown."""
        versions = [d for d in self.corpus if d.doc_id == doc_id]
        if not versions:
            raise KeyError(doc_id)
        return versions

    def in_time_order(self) -> list[DocVersion]:
        """The corpus sorted stably by ``valid_from``."""
        return sorted(self.corpus, key=lambda d: d.valid_from)

    def fingerprint(self) -> str:
        """SHA-256 hex over the canonical bytes of both files (as ``write_dataset`` writes)."""
        h = hashlib.sha256()
        for name, data in (
            (CORPUS_FILE, _corpus_bytes(self.corpus)),
            (QUERIES_FILE, _queries_bytes(_all_queries(self))),
        ):
            h.update(f"{name}\0{len(data)}\0".encode())
            h.update(data)
        return h.hexdigest()

    def summary(self) -> dict[str, int]:
        return {
            "documents": len(self.doc_ids()),
            "versions": len(self.corpus),
            "queries": len(self.queries),
            "injected": sum(d.injected for d in self.corpus),
            "unanswerable": len(self.unanswerable),
            "repaired": len(self.repaired),
        }


# --- reading ------------------------------------------------------------------------------


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _type_name(value: Any) -> str:
    return _JSON_TYPE.get(type(value), type(value).__name__)


def _get(obj: Mapping[str, Any], key: str, required: bool) -> Any:
    """The field's value; None when an optional field is absent or null."""
    if key not in obj:
        if required:
            raise _Bad(f"missing field {key!r}")
        return None
    return obj[key]


def _str(obj: Mapping[str, Any], key: str, *, required: bool = True, empty_ok: bool = False,
         default: str | None = None) -> str | None:  # fmt: skip
    value = _get(obj, key, required)
    if value is None:
        if required:
            raise _Bad(f"field {key!r} must be a string, got null")
        return default
    if not isinstance(value, str):
        raise _Bad(f"field {key!r} must be a string, got {_type_name(value)} ({_show(value)})")
    if not empty_ok and not value.strip():
        raise _Bad(f"field {key!r} is empty")
    return value


def _time(obj: Mapping[str, Any], key: str, *, required: bool = True) -> datetime | None:
    value = _get(obj, key, required)
    if value is None:
        if required:
            raise _Bad(f"field {key!r} must be an ISO-8601 time, got null")
        return None
    if isinstance(value, datetime):
        t = value
    elif isinstance(value, str):
        try:
            t = datetime.fromisoformat(value)
        except ValueError:
            raise _Bad(f"field {key!r} is not an ISO-8601 time: {_show(value)}") from None
    else:
        raise _Bad(f"field {key!r} must be an ISO-8601 string, got {_type_name(value)}")
    try:
        t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    except (OverflowError, ValueError):
        raise _Bad(f"field {key!r} is out of range in UTC: {_show(value)}") from None
    if t.year > LAST_YEAR:  # (a repaired time moves one second later; the replay adds days)
        raise _Bad(f"field {key!r} must be before {LAST_YEAR + 1}-01-01, got {_show(value)}")
    return t


def _str_list(obj: Mapping[str, Any], key: str, *, required: bool) -> tuple[str, ...]:
    value = _get(obj, key, required)
    if value is None:
        if required:
            raise _Bad(f"field {key!r} must be a list of strings, got null")
        return ()
    if not isinstance(value, list | tuple):
        raise _Bad(f"field {key!r} must be a list of strings, got {_type_name(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise _Bad(f"field {key!r} item {i} must be a string, got {_type_name(item)}")
        if not item.strip():
            raise _Bad(f"field {key!r} item {i} is empty")
    if required and not value:
        raise _Bad(f"field {key!r} is empty")
    return tuple(value)


def _object(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = _get(obj, key, False)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Bad(f"field {key!r} must be an object, got {_type_name(value)}")
    return dict(value)


def _extra(obj: Mapping[str, Any], known: Sequence[str]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in known}


def _parse_doc(obj: Any, line: int | None) -> DocVersion:
    if not isinstance(obj, dict):
        raise _Bad(f"expected a JSON object, got {_type_name(obj)}")
    doc_id = _str(obj, "doc_id")
    version = _get(obj, "version", True)
    if type(version) is not int:
        raise _Bad(f"field 'version' must be an integer, got {_type_name(version)} "
                   f"({_show(version)})")  # fmt: skip
    if not 1 <= version <= MAX_VERSION:
        raise _Bad(f"field 'version' must be in [1, {MAX_VERSION}], got {version}")
    text = _str(obj, "text")
    valid_from = _time(obj, "valid_from")
    valid_to = _time(obj, "valid_to", required=False)
    source_type = _str(obj, "source_type", required=False, default="unknown")
    authority = _get(obj, "authority", False)
    if authority is None:
        authority = default_authority(source_type)
    elif type(authority) not in (int, float):
        raise _Bad(f"field 'authority' must be a number, got {_type_name(authority)} "
                   f"({_show(authority)})")  # fmt: skip
    elif not 0.0 <= authority <= 1.0:  # also catches NaN; exact for huge ints
        raise _Bad(f"field 'authority' must be in [0, 1], got {authority!r}")
    meta = _object(obj, "meta")
    _check_meta(meta)
    return DocVersion(
        doc_id=doc_id,
        version=version,
        text=text,
        valid_from=valid_from,
        valid_to=valid_to,
        source_type=source_type,
        authority=float(authority),
        author=_str(obj, "author", required=False, empty_ok=True, default=""),
        depends_on=_str_list(obj, "depends_on", required=False),
        meta=meta,
        extra=_extra(obj, _DOC_FIELDS),
        line=line,
    )


def _check_meta(meta: Mapping[str, Any]) -> None:
    """The types of the ``meta`` fields grading reads: ``injected`` and ``contradicts``."""
    if "injected" in meta and not isinstance(meta["injected"], bool):
        value = meta["injected"]
        raise _Bad(f"field 'meta.injected' must be a boolean, got {_type_name(value)} "
                   f"({_show(value)})")  # fmt: skip
    if "contradicts" in meta:
        value = meta["contradicts"]
        if not isinstance(value, list):
            raise _Bad(f"field 'meta.contradicts' must be a list of doc ids, got "
                       f"{_type_name(value)} ({_show(value)})")  # fmt: skip
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise _Bad(f"field 'meta.contradicts' item {i} must be a string, got "
                           f"{_type_name(item)} ({_show(item)})")  # fmt: skip
            if not item.strip():
                raise _Bad(f"field 'meta.contradicts' item {i} is empty")


def _parse_query(obj: Any, line: int | None) -> Query:
    if not isinstance(obj, dict):
        raise _Bad(f"expected a JSON object, got {_type_name(obj)}")
    return Query(
        id=_str(obj, "id"),
        text=_str(obj, "text"),
        asked_at=_time(obj, "asked_at"),
        doc_ids=_str_list(obj, "doc_ids", required=True),
        answer=_str(obj, "answer"),
        stale_answers=_str_list(obj, "stale_answers", required=False),
        kind=_str(obj, "kind", required=False, default="current"),
        meta=_object(obj, "meta"),
        extra=_extra(obj, _QUERY_FIELDS),
        line=line,
    )


def repair_times(times: Sequence[datetime]) -> list[datetime]:
    """One document's version times (in version order) made strictly increasing, in UTC.

    The loader's rule: a time that is not after its (already repaired) predecessor's becomes
    the predecessor's plus ``REPAIR_STEP`` (1 s); every other time is kept. So a version
    that carries an earlier time than the one before it (git author times after a rebase or
    a late merge) takes effect just after its predecessor, never before it.
    """
    out: list[datetime] = []
    for t in times:
        t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
        if out and t <= out[-1]:
            t = out[-1] + REPAIR_STEP
        out.append(t)
    return out


class _CorpusChecker:
    """Version order per document, checked line by line.

    Version numbers must increase. Times out of order are errors when ``strict``; otherwise
    ``add`` returns the version repaired (``valid_from`` by ``repair_times``'s rule, then a
    ``valid_to`` not after ``valid_from`` dropped) and records it in ``repairs``.
    """

    def __init__(self, strict: bool = True) -> None:
        self.strict = strict
        self.last: dict[str, tuple[DocVersion, int]] = {}
        self.repairs: list[tuple[str, int, int, str]] = []  # doc, version, line, what

    def add(self, doc: DocVersion, line: int) -> DocVersion:
        if doc.valid_to is not None and doc.valid_to <= doc.valid_from:
            # an error within the line itself, not an ordering problem: never repaired
            raise _Bad(f"field 'valid_to' ({format_time(doc.valid_to)}) must be after "
                       f"valid_from ({format_time(doc.valid_from)})")  # fmt: skip
        prev = self.last.get(doc.doc_id)
        changes: dict[str, Any] = {}
        what: list[str] = []
        valid_from = doc.valid_from
        if prev is not None:
            before, before_line = prev
            if doc.version == before.version:
                raise _Bad(f"duplicate version {doc.version} of doc {doc.doc_id!r} "
                           f"(also on line {before_line})")  # fmt: skip
            if doc.version < before.version:
                raise _Bad(f"version {doc.version} of doc {doc.doc_id!r} comes after version "
                           f"{before.version} (line {before_line}); versions must increase "
                           "in file order")  # fmt: skip
            if valid_from <= before.valid_from:
                if self.strict:
                    raise _Bad(f"valid_from {format_time(valid_from)} of doc {doc.doc_id!r} "
                               f"version {doc.version} is not after version {before.version}'s "
                               f"{format_time(before.valid_from)} (line {before_line})"
                               )  # fmt: skip
                valid_from = repair_times([before.valid_from, valid_from])[1]
                changes["valid_from"] = valid_from
                what.append(f"valid_from {format_time(doc.valid_from)} -> "
                            f"{format_time(valid_from)}")  # fmt: skip
        if doc.valid_to is not None and doc.valid_to <= valid_from:  # only after a repair
            changes["valid_to"] = None
            what.append(f"valid_to {format_time(doc.valid_to)} dropped")
        if changes:
            doc = dataclasses.replace(doc, **changes)
            self.repairs.append((doc.doc_id, doc.version, line, ", ".join(what)))
        self.last[doc.doc_id] = (doc, line)
        return doc


def _check_depends(doc: DocVersion, known: set[str]) -> None:
    """The doc ids ``depends_on`` and ``meta.contradicts`` name exist in the corpus."""
    for dep in doc.depends_on:
        if dep not in known:
            raise _Bad(f"field 'depends_on' names unknown doc id {_show(dep)}")
    contradicts = doc.meta.get("contradicts")
    for doc_id in contradicts if isinstance(contradicts, list) else ():
        if not isinstance(doc_id, str) or doc_id not in known:  # (a DocVersion given as is)
            raise _Bad(f"field 'meta.contradicts' names unknown doc id {_show(doc_id)}")


def _check_doc_ids(query: Query, known: set[str]) -> None:
    for doc_id in query.doc_ids:
        if doc_id not in known:
            raise _Bad(f"field 'doc_ids' names unknown doc id {_show(doc_id)}")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Bad(f"duplicate key {_show(key)}")
            seen.add(key)
    return obj


def _reject_constant(name: str) -> Any:
    raise _Bad(f"invalid JSON: {name} is not a JSON number")


def _read_lines(path: Path) -> Iterable[tuple[int, Any]]:
    """``(line number, parsed JSON)`` for every non-blank line of a JSONL file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{path}: file not found", file=path.name) from None
    except OSError as e:
        raise DatasetError(f"{path}: cannot read: {e.strerror or e}", file=path.name) from None
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            bad = raw[e.start : e.start + 1].hex()
            raise DatasetError(
                f"{path.name}:{number}: not valid UTF-8: byte 0x{bad} at column {e.start + 1}",
                file=path.name,
                line=number,
            ) from None
        if not text.strip():
            continue
        try:
            obj = json.loads(
                text, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant
            )
            if "\\u" in text:  # escapes may decode to lone surrogates, unwritable as UTF-8
                json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except _Bad as e:
            raise DatasetError(f"{path.name}:{number}: {e}", path.name, number) from None
        except json.JSONDecodeError as e:
            raise DatasetError(
                f"{path.name}:{number}: invalid JSON: {e.msg} (column {e.colno})",
                path.name,
                number,
            ) from None
        except UnicodeEncodeError:
            raise DatasetError(
                f"{path.name}:{number}: a string escape encodes a lone surrogate (not UTF-8)",
                path.name,
                number,
            ) from None
        except (ValueError, RecursionError) as e:
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise DatasetError(
                f"{path.name}:{number}: invalid JSON: {reason}", path.name, number
            ) from None
        yield number, obj


def load_dataset(path: str | os.PathLike[str], *, strict: bool = False) -> Dataset:
    """Load and validate a dataset directory; raise ``DatasetError`` at the first bad line.

    Line checks run in file order, corpus first. ``depends_on`` references are checked once
    the whole corpus is read (so a document may depend on one defined later). Two problems
    of real data are not errors unless ``strict``:

    - a version whose ``valid_from`` is not after its predecessor's (same document) gets the
      predecessor's time + 1 s (``repair_times``), and a ``valid_to`` that is then not after
      its ``valid_from`` is dropped; one ``OutOfOrderVersionsWarning`` counts the repaired
      versions and names the first few, and ``Dataset.repaired`` lists them all;
    - a query whose ``answer`` no version of its ``doc_ids`` contains is excluded with one
      ``UnanswerableQueryWarning``.

    With ``strict=True`` the first of either is a ``DatasetError`` naming its file and line.
    """
    root = Path(path)
    if not root.is_dir():
        what = "is not a directory" if root.exists() else "dataset directory not found"
        raise DatasetError(f"{root}: {what}")
    corpus: list[DocVersion] = []
    checker = _CorpusChecker(strict=strict)
    for number, obj in _read_lines(root / CORPUS_FILE):
        try:
            doc = checker.add(_parse_doc(obj, number), number)
        except _Bad as e:
            raise DatasetError(f"{CORPUS_FILE}:{number}: {e}", CORPUS_FILE, number) from None
        corpus.append(doc)
    if not corpus:
        raise DatasetError(f"{CORPUS_FILE}: contains no documents", CORPUS_FILE)
    known = set(checker.last)
    for doc in corpus:
        try:
            _check_depends(doc, known)
        except _Bad as e:
            raise DatasetError(f"{CORPUS_FILE}:{doc.line}: {e}", CORPUS_FILE, doc.line) from None

    texts: dict[str, list[str]] = {}
    for doc in corpus:
        texts.setdefault(doc.doc_id, []).append(doc.text)
    queries: list[Query] = []
    excluded: list[Query] = []
    unanswerable: list[tuple[str, str]] = []
    first_line: dict[str, int] = {}
    for number, obj in _read_lines(root / QUERIES_FILE):
        try:
            query = _parse_query(obj, number)
            if query.id in first_line:
                raise _Bad(f"duplicate query id {_show(query.id)} "
                           f"(first on line {first_line[query.id]})")  # fmt: skip
            _check_doc_ids(query, known)
            first_line[query.id] = number
            answerable = any(
                contains_answer(t, query.answer) for d in query.doc_ids for t in texts[d]
            )
            if not answerable:
                reason = (f"answer {_show(query.answer)} does not occur in any version of "
                          f"doc_ids {', '.join(map(repr, query.doc_ids))}")  # fmt: skip
                if strict:
                    raise _Bad(reason)
                unanswerable.append((query.id, reason))
                excluded.append(query)
                continue
        except _Bad as e:
            raise DatasetError(f"{QUERIES_FILE}:{number}: {e}", QUERIES_FILE, number) from None
        queries.append(query)
    if not first_line:
        raise DatasetError(f"{QUERIES_FILE}: contains no queries", QUERIES_FILE)
    if checker.repairs:
        n_from = sum("valid_from" in what for *_, what in checker.repairs)
        n_to = sum("valid_to" in what for *_, what in checker.repairs)
        shown = ", ".join(f"{CORPUS_FILE}:{line} {doc_id!r} v{version}"
                          for doc_id, version, line, _ in checker.repairs[:_SHOWN_IDS])
        extra = len(checker.repairs) - _SHOWN_IDS
        more = f" (+{extra} more)" if extra > 0 else ""
        warnings.warn(
            f"{root}: repaired {len(checker.repairs)} of {len(corpus)} versions whose time is "
            f"not after the previous version's ({n_from} valid_from moved to 1 s after it, "
            f"{n_to} valid_to dropped; strict=True makes this an error): {shown}{more}",
            OutOfOrderVersionsWarning,
            stacklevel=2,
        )
    if unanswerable:
        ids = [qid for qid, _ in unanswerable]
        shown = ", ".join(ids[:_SHOWN_IDS])
        more = f" (+{len(ids) - _SHOWN_IDS} more)" if len(ids) > _SHOWN_IDS else ""
        warnings.warn(
            f"{root}: excluded {len(ids)} of {len(first_line)} queries whose answer no version "
            f"of their doc_ids contains: {shown}{more}",
            UnanswerableQueryWarning,
            stacklevel=2,
        )
    repaired = [(doc_id, version, what) for doc_id, version, _, what in checker.repairs]
    return Dataset(corpus, queries, root, unanswerable, excluded, repaired)


# --- writing ------------------------------------------------------------------------------


def format_time(t: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` in UTC (with ``.ffffff`` only if there are microseconds)."""
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    frac = f".{t.microsecond:06d}" if t.microsecond else ""
    return (f"{t.year:04d}-{t.month:02d}-{t.day:02d}T"
            f"{t.hour:02d}:{t.minute:02d}:{t.second:02d}{frac}Z")  # fmt: skip


def _doc_record(d: DocVersion) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "doc_id": d.doc_id,
        "version": d.version,
        "valid_from": format_time(d.valid_from),
    }
    if d.valid_to is not None:
        rec["valid_to"] = format_time(d.valid_to)
    rec.update(source_type=d.source_type, authority=float(d.authority), author=d.author)
    if d.depends_on:
        rec["depends_on"] = list(d.depends_on)
    rec["text"] = d.text
    if d.meta:
        rec["meta"] = d.meta
    rec.update(sorted(d.extra.items()))
    return rec


def _query_record(q: Query) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": q.id,
        "kind": q.kind,
        "asked_at": format_time(q.asked_at),
        "text": q.text,
        "doc_ids": list(q.doc_ids),
        "answer": q.answer,
        "stale_answers": list(q.stale_answers),
    }
    if q.meta:
        rec["meta"] = q.meta
    rec.update(sorted(q.extra.items()))
    return rec


def _dumps(records: Iterable[dict[str, Any]]) -> bytes:
    lines = (
        json.dumps(r, ensure_ascii=False, sort_keys=False, separators=(", ", ": "))
        for r in records
    )
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _corpus_bytes(corpus: Iterable[DocVersion]) -> bytes:
    return _dumps(_doc_record(d) for d in corpus)


def _queries_bytes(queries: Iterable[Query]) -> bytes:
    return _dumps(_query_record(q) for q in queries)


def _all_queries(ds: Dataset) -> list[Query]:
    """Answerable and excluded queries, back in file order (new ones last)."""
    if not ds.excluded:
        return list(ds.queries)
    both = list(ds.queries) + list(ds.excluded)
    return sorted(both, key=lambda q: (q.line is None, q.line or 0))


def _from_records(
    corpus: Iterable[Mapping[str, Any] | DocVersion],
    queries: Iterable[Mapping[str, Any] | Query],
) -> tuple[list[DocVersion], list[Query]]:
    """Validate plain records as ``load_dataset(strict=True)`` would, answers aside.

    Out-of-order times are errors here, never repaired: the writer does not change data
    (repair with ``repair_times`` first, or load the files non-strictly and write that).
    """
    docs: list[DocVersion] = []
    checker = _CorpusChecker(strict=True)
    for i, rec in enumerate(corpus, start=1):
        try:
            doc = rec if isinstance(rec, DocVersion) else _parse_doc(rec, None)
            checker.add(doc, i)
        except _Bad as e:
            raise DatasetError(f"{CORPUS_FILE}:{i}: {e}", CORPUS_FILE, i) from None
        docs.append(doc)
    known = set(checker.last)
    for i, doc in enumerate(docs, start=1):
        try:
            _check_depends(doc, known)
        except _Bad as e:
            raise DatasetError(f"{CORPUS_FILE}:{i}: {e}", CORPUS_FILE, i) from None
    out: list[Query] = []
    seen: set[str] = set()
    for i, rec in enumerate(queries, start=1):
        try:
            query = rec if isinstance(rec, Query) else _parse_query(rec, None)
            if query.id in seen:
                raise _Bad(f"duplicate query id {_show(query.id)}")
            seen.add(query.id)
            _check_doc_ids(query, known)
        except _Bad as e:
            raise DatasetError(f"{QUERIES_FILE}:{i}: {e}", QUERIES_FILE, i) from None
        out.append(query)
    return docs, out


def _write_atomic(target: Path, data: bytes) -> None:
    atomic_write_bytes(target, data)


def write_dataset(
    ds_or_records: Dataset
    | tuple[Sequence[Mapping[str, Any] | DocVersion], Sequence[Mapping[str, Any] | Query]],
    path: str | os.PathLike[str],
) -> Path:
    """Write ``corpus.jsonl`` and ``queries.jsonl`` in canonical form; return the directory.

    Takes a ``Dataset`` (its excluded unanswerable queries are written too, in file order) or
    ``(corpus records, query records)``, which are validated like loaded lines first (as with
    ``strict=True``: out-of-order times are errors, not repaired). Each file goes to a
    temporary file that then replaces the target.
    """
    if isinstance(ds_or_records, Dataset):
        corpus, queries = list(ds_or_records.corpus), _all_queries(ds_or_records)
    else:
        records_corpus, records_queries = ds_or_records
        corpus, queries = _from_records(records_corpus, records_queries)
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    _write_atomic(root / CORPUS_FILE, _corpus_bytes(corpus))
    _write_atomic(root / QUERIES_FILE, _queries_bytes(queries))
    return root
