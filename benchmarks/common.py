"""Shared helpers: machine description, timing, log-log fits, result files."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from experiments.methods.reference_impl import ensure_poc as install_poc

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "benchmarks"
POC_DIR = ROOT / ".cache" / "poc"


def machine() -> dict:
    """CPU model, cores, RAM, versions, date and load: where a figure was measured."""
    from importlib.metadata import version

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": ram,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "hnswlib": version("hnswlib"),
        "platform": platform.platform(),
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_avg_at_start": list(os.getloadavg()),
        "command": command(),
    }


def command() -> str:
    """How this benchmark was started, as ``python -m benchmarks.<name> <args>``."""
    script = Path(sys.argv[0]).resolve()
    try:
        module = script.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
    except ValueError:
        module = script.name
    return " ".join(["python", "-m", module, *sys.argv[1:]])


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) * 1024
    return 0


def loglog_fit(sizes, values) -> tuple[float, float]:
    """(exponent b, coefficient a) of ``value = a * size^b``, least squares in log-log."""
    x, y = np.log(np.asarray(sizes, float)), np.log(np.asarray(values, float))
    (b, loga), *_ = np.linalg.lstsq(np.stack([x, np.ones_like(x)], axis=1), y, rcond=None)
    return float(b), float(np.exp(loga))


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def summarise_us(samples_s) -> dict:
    """p50/p95/mean of a list of durations in seconds, in microseconds."""
    a = np.asarray(samples_s, float) * 1e6
    return {"p50_us": round(float(np.percentile(a, 50)), 1),
            "p95_us": round(float(np.percentile(a, 95)), 1),
            "mean_us": round(float(a.mean()), 1), "samples": len(a)}


def write_result(name: str, data: dict, out: str | None = None) -> Path:
    path = Path(out) if out else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=_json_default) + "\n")
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return path


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o))


def sizes_arg(text: str) -> list[int]:
    """``"1e4,1e5,1e6"`` or ``"10000,100000"`` -> ints."""
    return [int(float(s)) for s in text.split(",") if s.strip()]


def ensure_poc() -> Path:
    """Install the reference proof-of-concept into .cache/poc (never into this interpreter:
    its import package is also called ``smartvector``); it runs only in subprocesses. The
    installer is the ``paper_code`` method row's (:mod:`experiments.methods.reference_impl`)."""
    return install_poc(POC_DIR)


def run_poc(spec: dict, timeout: float = 1800) -> dict:
    """Run :mod:`benchmarks._poc_runner` on ``spec`` in a subprocess with the PoC on its path."""
    ensure_poc()
    env = {**os.environ, "PYTHONPATH": str(POC_DIR), "PYTHONNOUSERSITE": "1"}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("_poc_runner.py"))],
        input=json.dumps(spec), env=env, capture_output=True, text=True, timeout=timeout,
        cwd="/", check=False)
    if out.returncode != 0:
        raise RuntimeError(f"proof-of-concept run failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def poc_vectors(n: int, seed: int = 0) -> list[dict]:
    """The texts and metadata of a benchmark corpus of ``n`` vectors, for the PoC runner:
    version-1 chunks and their edits, the superseded ones marked deprecated."""
    from smartvector.sources import default_authority

    from .workload import SOURCES, make_corpus

    c = make_corpus(n, seed=seed)
    out = []
    doc_of = np.repeat(np.arange(len(c.doc_size)), c.doc_size)
    for i, text in enumerate(c.texts):
        d = int(doc_of[i])
        src = c.doc_source[d]
        base = {"doc": c.doc_id(d), "chunk": int(i - c.doc_start[d]), "source": src,
                "authority": default_authority(src)}
        out.append({**base, "version": 1, "text": text, "day": float(c.doc_day[d]),
                    "deprecated": bool(c.edited[i])})
        if c.edited[i]:
            out.append({**base, "version": 2, "text": c.edit_texts[i],
                        "day": float(c.doc_update_day[d]), "deprecated": False})
    assert SOURCES  # the same source mix as the SmartVector stores
    return out
