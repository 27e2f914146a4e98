"""Time the reference proof-of-concept (PyPI ``smartvector-rag`` 0.1.1) in its own process.

Run by :func:`benchmarks.common.run_poc` with ``PYTHONPATH=.cache/poc``: the PoC's import
package is also named ``smartvector``, so it must never share a process with this project's.
Reads a JSON spec on stdin (``mode``: ``query`` or ``consolidation``, the vectors' texts and
metadata, the query texts) and prints one JSON line of timings.

The PoC store is filled directly with its ``SmartVector`` records (its ``ingest_document`` scans
every stored vector per chunk, so ingestion alone is quadratic); 30% of the vectors are
DEPRECATED as in the SmartVector benchmark store, the rest ACTIVE (or UNCONSOLIDATED for a
consolidation pass). A PoC query scores every non-deprecated vector in Python
(``include_dormant=True``, as this project's store also returns dormant vectors).
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path


def main() -> None:
    spec = json.load(sys.stdin)
    import smartvector as poc

    where = Path(poc.__file__).resolve()
    if ".cache/poc" not in where.as_posix():
        raise SystemExit(f"imported the wrong smartvector package: {where}")
    from smartvector import SmartVector, SmartVectorDB, VectorStatus

    t0 = datetime(2024, 1, 1)
    db = SmartVectorDB()
    for i, v in enumerate(spec["vectors"]):
        sv = SmartVector(
            vector_id=f"v{i}", doc_id=v["doc"], doc_version=v["version"],
            chunk_index=v["chunk"], content=v["text"], source_name=v["doc"],
            source_type=v["source"], author="bench", base_confidence=v["authority"],
            created_at=t0 + timedelta(days=v["day"]), updated_at=t0 + timedelta(days=v["day"]),
        )
        if v["deprecated"]:
            sv.status = VectorStatus.DEPRECATED
        elif spec["mode"] == "query":
            sv.status = VectorStatus.ACTIVE
        db.vectors[sv.vector_id] = sv
    out: dict = {"n": len(db.vectors), "poc_file": where.as_posix()}
    if spec["mode"] == "query":
        ref = t0 + timedelta(days=spec["reference_day"])
        times = []
        for q in spec["queries"]:
            t = time.perf_counter()
            db.query(q, top_k=spec["k"], include_dormant=True, reference_time=ref)
            times.append(time.perf_counter() - t)
        out["query_s"] = times
    else:
        times = []
        for _ in range(spec["repeats"]):
            t = time.perf_counter()
            db.run_consolidation()
            times.append(time.perf_counter() - t)
        out["consolidation_s"] = times
    print(json.dumps(out))


if __name__ == "__main__":
    main()
