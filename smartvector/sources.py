"""Source types and their default authority (the SmartVector paper's table)."""

from __future__ import annotations

SOURCE_AUTHORITY: dict[str, float] = {
    "official_db": 0.95,
    "policy_doc": 0.90,
    "technical_doc": 0.85,
    "wiki": 0.75,
    "email": 0.50,
    "meeting_notes": 0.45,
    "slack": 0.30,
    "chat": 0.30,
    "unknown": 0.20,
}


def default_authority(source_type: str) -> float:
    """Authority of a source type; unknown types get the ``unknown`` value."""
    return SOURCE_AUTHORITY.get(source_type, SOURCE_AUTHORITY["unknown"])
