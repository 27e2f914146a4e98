"""Where a result came from: configuration fingerprints, the git commit, package versions."""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

PACKAGES = ("smartvector-bench", "numpy", "hnswlib", "sentence-transformers", "torch",
            "mlflow", "hydra-core")


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists become JSON strings."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        elif isinstance(v, list | tuple):
            out[key] = json.dumps(list(v))
        else:
            out[key] = v
    return out


def fingerprint(obj: Any) -> str:
    """Short SHA-256 of a JSON-serialisable object (sorted keys)."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


@functools.cache
def git_commit(cwd: Path) -> str:
    """The commit checked out at ``cwd`` ("unknown" outside a git checkout; asked once per
    process)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, timeout=10, check=False)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@functools.cache
def package_versions() -> dict[str, str]:
    """The installed versions of the packages that can move a result (read once per
    process)."""
    out = {}
    for p in PACKAGES:
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = "absent"
    return out
