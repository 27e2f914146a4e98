"""Reference times: the library never reads the wall clock; callers pass ``at=``."""

from __future__ import annotations

from datetime import UTC, datetime

DAY = 86400.0
TimeLike = datetime | float | int | str


def to_ts(t: TimeLike) -> float:
    """POSIX seconds from a datetime (naive means UTC), ISO-8601 string or number."""
    if isinstance(t, bool):
        raise TypeError("a time cannot be a bool")
    if isinstance(t, int | float):
        return float(t)
    if isinstance(t, str):
        t = datetime.fromisoformat(t.replace("Z", "+00:00"))
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        return t.timestamp()
    raise TypeError(f"cannot read a time from {type(t).__name__}: {t!r}")


def to_datetime(ts: float) -> datetime:
    """UTC datetime from POSIX seconds."""
    return datetime.fromtimestamp(ts, tz=UTC)
