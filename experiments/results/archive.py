"""The per-query files behind the published tables, packed for the repository.

``python -m experiments.results.archive --results-root outputs --out results/runs`` packs the
finished configurations of each published study into one ``<out>/<study>.tar.xz``; for each
configuration, under ``<fingerprint>/``: its TREC runs (``runs/<method>.txt``), its relevance
labels (``qrels/<set>.txt``) and ``top1.csv`` (per query and method: the kind, the top-1 grade
and the method's probability, which calibration needs). Every ranking metric of the report can
be recomputed from these files alone with an IR library (``tests/test_published_runs.py``
does it for Table 1). One pack a study compresses its configurations together (the regime
map's 180 take 4.5 MB instead of 13 MB packed one by one); packing is deterministic: the same
files give the same bytes.
"""

from __future__ import annotations

import argparse
import io
import lzma
import tarfile
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from experiments.results.record import PREDICTIONS_FILE, RUNS_DIR, find_results_dirs, read_results

#: the studies whose configurations the published tables are made from
PUBLISHED = ("paper_table1", "paper_table1_dev", "paper_regime_map", "paper_robustness",
             "paper_time_travel", "paper_feedback", "paper_sensitivity", "paper_authority",
             "paper_weights_dev", "paper_weights_test", "real_site_policy", "real_peps",
             "real_endoflife", "verdict_synth", "verdict_real", "verdict_dev_synth",
             "verdict_dev_real")
TOP1_COLUMNS = ["query_id", "method", "kind", "grade", "probability"]


def _members(results: Path) -> list[tuple[str, bytes]]:
    files = sorted((results / RUNS_DIR).glob("*.txt")) + sorted((results / "qrels").glob("*.txt"))
    out = [(f"{f.parent.name}/{f.name}", f.read_bytes()) for f in files]
    top1 = pd.read_csv(results / PREDICTIONS_FILE, keep_default_na=False, na_values=[""])
    out.append(("top1.csv", top1[TOP1_COLUMNS].to_csv(index=False).encode()))
    return out


def pack(dirs: list[Path], dest: Path) -> Path:
    """Results directories' per-query files as one deterministic ``.tar.xz``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in sorted(dirs):
            for name, data in _members(d):
                info = tarfile.TarInfo(f"{d.name}/{name}")
                info.size, info.mtime, info.mode = len(data), 0, 0o644
                tar.addfile(info, io.BytesIO(data))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(lzma.compress(buf.getvalue(), preset=9))
    return dest


def unpack(path: Path) -> dict[str, dict[str, str]]:
    """A pack's files: per configuration fingerprint, by name (``runs/<method>.txt``,
    ``qrels/<set>.txt``, ``top1.csv``)."""
    out: dict[str, dict[str, str]] = {}
    with tarfile.open(path, mode="r:xz") as tar:
        for m in tar.getmembers():
            if m.isfile():
                config, name = m.name.split("/", 1)
                out.setdefault(config, {})[name] = tar.extractfile(m).read().decode()
    return out


def export(results_root: Path, out: Path, studies: tuple[str, ...] = PUBLISHED) -> list[Path]:
    """One pack per study of its finished configurations (a study without any: no pack,
    and an old one removed, so ``out`` holds exactly what the tables were made from)."""
    written = []
    for study in tqdm(studies, desc="studies", unit="study"):
        dirs = []
        for d in find_results_dirs([results_root / study]):
            try:
                if read_results(d).error is None:
                    dirs.append(d)
            except ValueError:
                continue
        target = out / f"{study}.tar.xz"
        if dirs:
            written.append(pack(dirs, target))
        elif target.exists():
            target.unlink()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-root", default="outputs", type=Path)
    parser.add_argument("--out", default="results/runs", type=Path)
    args = parser.parse_args(argv)
    written = export(args.results_root, args.out)
    size = sum(p.stat().st_size for p in written)
    print(f"packed {len(written)} studies ({size / 1e6:.1f} MB) into {args.out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
