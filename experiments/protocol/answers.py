"""Answer matching: does a chunk state an answer the way a person reading it would accept?

Both the text and the answer are brought to one canonical form (``normalise``) and the answer
must then occur in the text as a *bounded* match (``contains_answer``). The canonical form
writes the same value one way: "1,000" and "1000", "thirty (30) days" and "30 days", "a
30-day period" and "30 days", "May 25th, 2018" and "2018-05-25". It never turns a bare number
word into digits, so "one of" stays as it is.
"""

from __future__ import annotations

import re
from datetime import date
from functools import lru_cache

_WHITESPACE = re.compile(r"\s+")
_ALNUM = r"[^\W_]"  # a letter or digit in any script (``\w`` without the underscore)
_LETTER = r"[^\W\d_]"
_DIGIT = re.compile(r"\d")

# Speed: a pattern starts with a character it consumes (a lookbehind, if any, comes after it),
# so the regex engine skips ahead to candidate positions, or runs only after a cheap one
# (``_HAS_...``) has found a candidate.

# --- 0. an ISO date followed by a time: a space before the "t" (after casefold) ---------------
_ISO_BEFORE_T = re.compile(rf"-(?<=(?<!{_ALNUM})\d{{4}}-)\d\d-\d\d(?=t\d)")  # "-05-25"

# --- 1. thousands separators: "1,000,000" -> "1000000"; "1,5" and "1,50" stay -----------------
_THOUSANDS = re.compile(r"\d(?<!\d\d)(?<!\d[.,]\d)\d{0,2}(?:,\d{3})+(?!\d)(?!,\d)")
_HAS_THOUSANDS = re.compile(r",\d{3}")

# --- 2. a number word beside the same number in parentheses -----------------------------------
_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
          "fourteen fifteen sixteen seventeen eighteen nineteen").split()  # fmt: skip
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_WORD_VALUE = {w: i for i, w in enumerate(_UNITS)} | {w: 20 + 10 * i for i, w in enumerate(_TENS)}


def _alt(words: list[str]) -> str:
    return "|".join(sorted(words, key=len, reverse=True))  # longest first: "seventeen", "seven"


_SUB100 = rf"(?:(?:{_alt(_TENS)})(?:[- ](?:{_alt(_UNITS[1:10])}))?|(?:{_alt(_UNITS)}))"
_NUMBER_WORD = rf"(?:(?:a|{_alt(_UNITS[1:10])})[- ]hundred(?:(?: and)?[- ]{_SUB100})?|{_SUB100})"
_WORD_THEN_DIGITS = re.compile(rf"(?<!{_ALNUM})({_NUMBER_WORD}) ?\( ?(\d+) ?\)")
_HAS_WORD_THEN_DIGITS = re.compile(r"\( ?\d+ ?\)")
_DIGITS_THEN_WORD = re.compile(
    rf"(\d(?<!{_ALNUM}\d)(?<!\d[.,]\d)\d*) ?\( ?({_NUMBER_WORD}) ?\)")


def _word_value(phrase: str) -> int:
    """The value of a number phrase matched by ``_NUMBER_WORD`` ("forty-five" -> 45)."""
    total = 0
    for word in re.split(r"[- ]", phrase):
        if word == "hundred":
            total = (total or 1) * 100
        elif word != "and":
            total += _WORD_VALUE.get(word, 1)  # "a" (hundred)
    return total


def _word_then_digits(m: re.Match[str]) -> str:
    return m[2] if _word_value(m[1]) == int(m[2]) else m[0]


def _digits_then_word(m: re.Match[str]) -> str:
    return m[1] if _word_value(m[2]) == int(m[1]) else m[0]


# --- 3. hyphenated units and one plural "s" after a number ------------------------------------
_NUMBER_HYPHEN_WORD = re.compile(rf"-(?<=\d-)(?={_LETTER})")
# a word of 3+ letters right after a number ending in one plural "s": "30 days" but not
# "30 ms", "5 class", "5 bonus", "5 basis", nor a few short words that are no plurals
_NOT_PLURAL = "was|has|does|goes|yes|its|this|his|gas"
_PLURAL_AFTER_NUMBER = re.compile(
    rf" (?<=\d )(?!(?:{_NOT_PLURAL})(?!{_ALNUM}))({_LETTER}+[^\W\d_isu])s(?!{_ALNUM})")

# --- 4. written dates -> ISO yyyy-mm-dd ---------------------------------------------------------
_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4,
    "apr": 4, "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
    "september": 9, "sept": 9, "sep": 9, "october": 10, "oct": 10, "november": 11, "nov": 11,
    "december": 12, "dec": 12,
}  # fmt: skip
# for speed, any word of 3 to 9 ASCII letters starting as a month does; ``_iso_date`` keeps
# only month names
_MONTH = rf"(?P<month>[adfjmnos](?<!{_ALNUM}.)[a-z]{{2,8}})(?!{_ALNUM})\.?"
_DAY = rf"(?P<day>\d(?<!{_ALNUM}\d)(?<!\d[.,]\d)\d?)(?:st|nd|rd|th)?"
_YEAR = rf"(?P<year>\d{{4}})(?!{_ALNUM})(?![.,]\d)"
_SEP = r"(?:, ?| )"
_MONTH_DAY_YEAR = re.compile(rf"{_MONTH} {_DAY}{_SEP}{_YEAR}")
_HAS_DAY_YEAR = re.compile(rf"\d(?:st|nd|rd|th)?{_SEP}\d{{4}}")
_DAY_MONTH_YEAR = re.compile(rf"{_DAY} (?:of )?{_MONTH}{_SEP}{_YEAR}")


def _iso_date(m: re.Match[str]) -> str:
    month = _MONTHS.get(m["month"])
    if month is None:
        return m[0]
    year, day = int(m["year"]), int(m["day"])
    try:
        date(year, month, day)
    except ValueError:  # Feb 30 and the like stay as written
        return m[0]
    return f"{year:04d}-{month:02d}-{day:02d}"


@lru_cache(maxsize=8192)
def normalise(text: str) -> str:
    """The canonical form of ``text`` that answers are matched in.

    Casefold, collapse every whitespace run to one space and strip; then, only where there
    are digits: a space between an ISO date and a following ``t``-time ("2018-05-25t00:00z"
    -> "2018-05-25 t00:00z"); thousands separators dropped from groups of exactly three
    ("12,500" -> "12500"; "1,5" stays); written dates as ISO ("may 25th, 2018", "25 may
    2018", "25th of sept. 2018" -> "2018-05-25" ...; invalid dates stay); a number word
    beside the same number in parentheses as the digits ("thirty (30)", "30 (thirty)" ->
    "30"); a hyphen between a number and a word as a space ("30-day" -> "30 day"); and one
    plural "s" dropped from a word of three or more letters right after a number ("30 days"
    -> "30 day"; "30 ms", "5 class", "5 bonus", "5 basis" and "5 was" stay).
    """
    text = _WHITESPACE.sub(" ", text.casefold()).strip()
    if _DIGIT.search(text) is None:
        return text
    text = _ISO_BEFORE_T.sub(r"\g<0> ", text)
    if _HAS_THOUSANDS.search(text):
        text = _THOUSANDS.sub(lambda m: m[0].replace(",", ""), text)
    if _HAS_DAY_YEAR.search(text):
        text = _MONTH_DAY_YEAR.sub(_iso_date, text)
    text = _DAY_MONTH_YEAR.sub(_iso_date, text)
    if "(" in text:
        if _HAS_WORD_THEN_DIGITS.search(text):
            text = _WORD_THEN_DIGITS.sub(_word_then_digits, text)
        text = _DIGITS_THEN_WORD.sub(_digits_then_word, text)
    if "-" in text:
        text = _NUMBER_HYPHEN_WORD.sub(" ", text)
    return _PLURAL_AFTER_NUMBER.sub(r" \1", text)


@lru_cache(maxsize=4096)
def _answer_pattern(answer: str) -> re.Pattern[str] | None:
    """Regex finding the normalised ``answer`` as a bounded match (None if it is empty)."""
    if not answer:
        return None
    before = after = ""
    if answer[0].isalnum():
        before = rf"(?<!{_ALNUM})"
        if answer[0].isdecimal():
            before += r"(?<!\d[.,])"
    if answer[-1].isalnum():
        after = rf"(?!{_ALNUM})"
        if answer[-1].isdecimal():
            after += r"(?![.,]\d)"
    return re.compile(before + re.escape(answer) + after)


@lru_cache(maxsize=1 << 16)
def contains_answer(text: str, answer: str) -> bool:
    """Whether ``text`` states ``answer``: both ``normalise``d, then a bounded match.

    The match must not continue a word or number: where the answer starts (ends) with a
    letter or digit, the character just before (after) the match must not be a letter or
    digit; where it starts (ends) with a digit, the character before (after) also must not be
    a ``.``/``,`` that is itself preceded (followed) by a digit. So "4 MB" is not in "14 MB",
    "30 days" not in "130 days", "5" not in "5.5" or "1,5", "2018-05-25" not in "2018-05-250";
    but "90 days" is in "every 90 days.", "30 days" in "a 30-day period" and in "thirty (30)
    days", "1000" in "1,000", and "2018-05-25" in "May 25, 2018" and "2018-05-25T00:00:00Z".
    An answer that normalises to nothing matches nothing. Remembered per (text, answer):
    a run's methods grade mostly the same chunks against the same answers.
    """
    pattern = _answer_pattern(normalise(answer))
    return pattern is not None and pattern.search(normalise(text)) is not None
