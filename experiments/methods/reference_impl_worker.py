"""The worker process of the ``smartvector_rag`` method (:mod:`experiments.methods.
reference_impl`): the paper's reference implementation (PyPI ``smartvector-rag`` 0.1.1),
driven over JSON lines on stdin/stdout.

The PoC's import package is also named ``smartvector``, like this project's library, so it
never shares a process with the harness. This file is run by path::

    python -S -P reference_impl_worker.py <poc_dir> '<options json>'

with ``PYTHONPATH=<poc_dir>``: ``-S`` keeps site-packages (and this project's editable
install) off the path, ``-P`` keeps this file's directory off ``sys.path[0]``; the PoC is
pure standard library. :func:`main` checks that ``import smartvector`` found the PoC under
``poc_dir``. The harness imports this module too (``load_builtin`` imports every module of
the package): at import time it defines functions only and imports nothing of the PoC.

Requests (one JSON object a line), each answered by one line ``{"ok": true, ...}`` or
``{"ok": false, "error": ...}``; the first line the worker writes is ``{"ok": true,
"ready": ...}``:

- ``{"op": "ingest", "doc_id", "version", "text", "source_type", "author", "authority",
  "ts"}``: ``db.ingest_document(..., authority=..., created_at=<ts>)`` -> ``chunks``;
- ``{"op": "consolidate", "at"}``: ``db.run_consolidation()`` with the simulated clock at
  ``at`` -> its summary's counts, and ``error`` (the TypeError of the shipped conflict
  resolution, caught and counted when ``avoid_conflict_crash`` is off);
- ``{"op": "query", "text", "at", "k"}``: ``db.query(text, top_k=k, reference_time=<at>)``
  -> ``hits``;
- ``{"op": "feedback", "vector_id", "accepted"}``: ``db.record_feedback``;
- ``{"op": "events"}``: the consolidation agent's event log (tests, debugging);
- ``{"op": "close"}`` (or end of input): exit.

Vector ids: the PoC draws ``uuid4()[:12]``; answers name each vector
``<doc_id>@v<version>#<chunk_index>`` instead (the same across runs), and ``V:<uuid>`` in
the event log is rewritten to those names.

Options: ``simulated_clock``, ``avoid_conflict_crash``, ``fast_conflict_scan``,
``fast_relationship_scan`` (see
:class:`experiments.methods.reference_impl.ReferenceImplParams`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

#: the PoC's version this worker is written against
POC_VERSION = "0.1.1"


def sim_time(ts: float) -> datetime:
    """Seconds since the epoch as the PoC's naive datetime (UTC; the worker runs with
    ``TZ=UTC``, so the PoC's ``datetime.now()`` is naive UTC too)."""
    return datetime.fromtimestamp(ts, UTC).replace(tzinfo=None)


def import_poc(poc_dir: str) -> Any:
    """``import smartvector``, checked to be the PoC installed under ``poc_dir``."""
    import smartvector as poc

    where = Path(poc.__file__).resolve()
    if not where.is_relative_to(Path(poc_dir).resolve()):
        raise SystemExit(f"imported the wrong smartvector package: {where} (expected the "
                         f"reference implementation under {poc_dir})")
    return poc


def poc_classes(poc: Any) -> SimpleNamespace:
    """The work-arounds, as subclasses of the PoC's public classes (its source untouched):

    - ``SimulatedClockEngine``: a ConfidenceEngine whose ``compute_current_confidence``
      reads ``clock.now`` (the replay's simulated time) when no ``reference_time`` is
      passed. consolidation.py:405 calls it without one, which falls back to
      ``datetime.now()`` at confidence.py:113.
    - ``IdentityVoteDetector``: a ConflictDetector whose conflict resolution counts the
      three votes by identity. The shipped one builds ``set(winners)`` of SmartVector
      dataclasses (``eq=True``, so ``__hash__ is None``) and raises ``TypeError:
      unhashable type`` at consolidation.py:135 for every conflicting pair. The winner is
      the same as the shipped code's once vectors are hashable (two or three of the three
      votes; ``==`` between two vectors with distinct ids is identity). The resolution is
      only written to the event log (consolidation.py:425-432): no status or score reads it.
    - ``FastScan``: ``detect_conflicts`` with each vector's word set built once per pass and
      difflib's ratio computed only when the word Jaccard exceeds ``topic_threshold``. A
      pair is a conflict iff Jaccard > 0.3 and ratio < 0.4, so skipping the ratio where the
      first test fails, and computing the same Jaccard from the same sets, gives the same
      list (same pairs, order, values and resolutions) as the shipped scan.
    - ``FastRelationshipBuilder``: ``build_relationships`` with the word sets built once a
      pass, not twice per pair: the same edges in the same order (see its docstring).
    """

    class SimulatedClockEngine(poc.ConfidenceEngine):
        def __init__(self, clock: SimpleNamespace, **kw: Any) -> None:
            super().__init__(**kw)
            self.clock = clock

        def compute_current_confidence(self, vector: Any, reference_time: Any = None
                                       ) -> float:
            return super().compute_current_confidence(
                vector, self.clock.now if reference_time is None else reference_time)

    class IdentityVoteDetector(poc.ConflictDetector):
        # Overrides the PoC's own (shipped, crashing) resolution on this subclass; the
        # shipped loop in detect_conflicts calls self._resolve_conflict. Same reasons,
        # winner and confidence as consolidation.py:112-142, votes counted by identity.
        @staticmethod
        def _resolve_conflict(va: Any, vb: Any) -> dict:
            reasons: list[str] = []
            recency_winner = va if va.created_at > vb.created_at else vb
            reasons.append(f"V:{recency_winner.vector_id} is more recent")
            if va.base_confidence > vb.base_confidence:
                authority_winner = va
                reasons.append(f"V:{va.vector_id} has higher authority "
                               f"({va.base_confidence} vs {vb.base_confidence})")
            else:
                authority_winner = vb
                reasons.append(f"V:{vb.vector_id} has higher authority "
                               f"({vb.base_confidence} vs {va.base_confidence})")
            feedback_winner = va if va.feedback_ratio > vb.feedback_ratio else vb
            winners = [recency_winner, authority_winner, feedback_winner]
            votes_a = sum(w is va for w in winners)
            winner = va if votes_a >= 2 else vb
            return {
                "preferred": winner.vector_id,
                "demoted": va.vector_id if winner is vb else vb.vector_id,
                "reasons": reasons,
                "confidence": "high" if sum(w is winner for w in winners) == 3 else "medium",
            }

    class FastScan:
        """Mixed in before a ConflictDetector class (see :func:`poc_classes`)."""

        def detect_conflicts(self, vectors: list, topic_threshold: float = 0.3,
                             content_threshold: float = 0.4) -> list[dict]:
            live = (poc.VectorStatus.ACTIVE, poc.VectorStatus.UNCONSOLIDATED)
            active = [v for v in vectors if v.status in live]
            words = [set(v.content.lower().split()) for v in active]
            sizes = [len(w) for w in words]
            conflicts: list[dict] = []
            for i, va in enumerate(active):
                wa, na = words[i], sizes[i]
                for j in range(i + 1, len(active)):
                    vb = active[j]
                    if (va.doc_id == vb.doc_id and va.doc_version == vb.doc_version
                            and va.chunk_index != vb.chunk_index):
                        continue
                    nb = sizes[j]
                    if na and nb:  # Jaccard; |A | B| = |A| + |B| - |A & B|
                        common = len(wa & words[j])
                        topic_sim = common / (na + nb - common)
                    else:
                        topic_sim = 0.0
                    if not topic_sim > topic_threshold:
                        continue
                    content_sim = self.content_similarity(va.content, vb.content)
                    if content_sim < content_threshold:
                        resolution = self._resolve_conflict(va, vb)
                        conflicts.append({
                            "vector_a": va.vector_id,
                            "vector_b": vb.vector_id,
                            "topic_similarity": round(topic_sim, 3),
                            "content_similarity": round(content_sim, 3),
                            "resolution": resolution,
                        })
            return conflicts

    class FastConflictDetector(FastScan, poc.ConflictDetector):
        pass

    class FastRelationshipBuilder(poc.RelationshipBuilder):
        """``build_relationships`` with each vector's word set built once a pass (the
        shipped one builds both sets for every pair, deprecated vectors included) and the
        union's size as ``|A| + |B| - |A & B|``: the same integers, so the same Jaccard,
        edges and order as the shipped builder."""

        def build_relationships(self, vectors: list, similarity_threshold: float = 0.35
                                ) -> list[dict]:
            relationships: list[dict] = []
            active = [v for v in vectors if v.status != poc.VectorStatus.ARCHIVED]
            words = [set(v.content.lower().split()) for v in active]
            sizes = [len(w) for w in words]
            for i, va in enumerate(active):
                wa, na = words[i], sizes[i]
                for j in range(i + 1, len(active)):
                    vb = active[j]
                    if va.doc_id == vb.doc_id and va.doc_version != vb.doc_version:
                        if va.doc_version < vb.doc_version:
                            older, newer = va, vb
                        else:
                            older, newer = vb, va
                        if self._offsets_overlap(older, newer):
                            relationships.append({
                                "type": "supersession",
                                "from": newer.vector_id,
                                "to": older.vector_id,
                                "description": (
                                    f"v{newer.doc_version} supersedes v{older.doc_version}"),
                            })
                            continue
                    nb = sizes[j]
                    if na and nb:
                        common = len(wa & words[j])
                        sim = common / (na + nb - common)
                    else:
                        sim = 0.0
                    if sim > similarity_threshold:
                        if va.base_confidence >= vb.base_confidence:
                            relationships.append({
                                "type": "dependency",
                                "from": vb.vector_id,
                                "to": va.vector_id,
                                "description": (
                                    f"V:{vb.vector_id} references "
                                    f"V:{va.vector_id} (sim={sim:.2f})"),
                            })
                        else:
                            relationships.append({
                                "type": "dependency",
                                "from": va.vector_id,
                                "to": vb.vector_id,
                                "description": (
                                    f"V:{va.vector_id} references "
                                    f"V:{vb.vector_id} (sim={sim:.2f})"),
                            })
            return relationships

    class FastIdentityVoteDetector(FastScan, IdentityVoteDetector):
        pass

    return SimpleNamespace(
        SimulatedClockEngine=SimulatedClockEngine, IdentityVoteDetector=IdentityVoteDetector,
        FastConflictDetector=FastConflictDetector,
        FastIdentityVoteDetector=FastIdentityVoteDetector,
        FastRelationshipBuilder=FastRelationshipBuilder)


def detector_class(poc: Any, classes: SimpleNamespace, *, avoid_conflict_crash: bool,
                   fast_conflict_scan: bool) -> type:
    """The conflict detector for the two options (the shipped one when both are off)."""
    return {(False, False): poc.ConflictDetector,
            (True, False): classes.IdentityVoteDetector,
            (False, True): classes.FastConflictDetector,
            (True, True): classes.FastIdentityVoteDetector}[
        (avoid_conflict_crash, fast_conflict_scan)]


_UUID_REF = re.compile(r"V:([0-9a-f-]{12})")


class Worker:
    """One PoC database and the simulated clock; :meth:`handle` answers one request."""

    def __init__(self, poc: Any, options: dict[str, Any]) -> None:
        self.poc = poc
        self.options = dict(options)
        self.clock = SimpleNamespace(now=None)
        classes = poc_classes(poc)
        engine = (classes.SimulatedClockEngine(self.clock) if options["simulated_clock"]
                  else poc.ConfidenceEngine())
        self.db = poc.SmartVectorDB(confidence_engine=engine)
        detector = detector_class(poc, classes,
                                  avoid_conflict_crash=options["avoid_conflict_crash"],
                                  fast_conflict_scan=options["fast_conflict_scan"])
        if detector is not poc.ConflictDetector:
            self.db.consolidation_agent.conflict_detector = detector()
        if options["fast_relationship_scan"]:
            self.db.consolidation_agent.relationship_builder = (
                classes.FastRelationshipBuilder())
        self.name_of: dict[str, str] = {}  # PoC vector id -> doc@vN#chunk
        self.poc_id: dict[str, str] = {}  # and back
        self.consolidation_errors = 0

    def _tick(self, ts: float) -> datetime:
        t = sim_time(ts)
        self.clock.now = t
        return t

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req["op"]
        if op == "ingest":
            return self.ingest(req)
        if op == "consolidate":
            return self.consolidate(req["at"])
        if op == "query":
            return self.query(req["text"], req["at"], req["k"])
        if op == "feedback":
            self.db.record_feedback(self.poc_id[req["vector_id"]], bool(req["accepted"]))
            return {}
        if op == "events":
            return {"events": self.events()}
        raise ValueError(f"unknown op {op!r}")

    def ingest(self, req: dict[str, Any]) -> dict[str, Any]:
        created = self._tick(req["ts"])
        out = self.db.ingest_document(
            doc_id=req["doc_id"], version=int(req["version"]), text=req["text"],
            source_name=req["doc_id"], source_type=req["source_type"],
            author=req["author"], authority=float(req["authority"]), created_at=created)
        for r in out:
            vid = r["vector_id"] if r["action"] == "ingested" else r["new_vector"]
            v = self.db.vectors[vid]
            name = f"{v.doc_id}@v{v.doc_version}#{v.chunk_index}"
            if name in self.poc_id:
                raise ValueError(f"{req['doc_id']} version {req['version']} ingested twice")
            self.name_of[vid], self.poc_id[name] = name, vid
        return {"chunks": len(out),
                "superseded": sum(r["action"] == "superseded" for r in out)}

    def consolidate(self, at: float) -> dict[str, Any]:
        self._tick(at)
        try:
            summary = self.db.run_consolidation()
        except TypeError as e:
            if self.options["avoid_conflict_crash"]:
                raise
            # the shipped conflict resolution (consolidation.py:135): the pass stops in
            # detect_conflicts, after dormancy, before relationships, ripples and the
            # promotion to ACTIVE; db.recent_changes is not cleared (db.py:260)
            self.consolidation_errors += 1
            return {"error": f"{type(e).__name__}: {e}", "where": _where(e)}
        return {"error": None, **{k: summary[k] for k in (
            "vectors_processed", "conflicts_found", "relationships_built",
            "ripples_propagated", "vectors_dormant", "vectors_consolidated")}}

    def query(self, text: str, at: float, k: int) -> dict[str, Any]:
        results = self.db.query(text, top_k=int(k), reference_time=self._tick(at))
        return {"hits": [{
            "vector_id": self.name_of[r.vector.vector_id], "doc_id": r.vector.doc_id,
            "version": r.vector.doc_version, "chunk": r.vector.chunk_index,
            "text": r.vector.content, "score": r.final_score,
            "semantic": r.similarity_score, "temporal": r.temporal_score,
            "confidence": r.confidence_score, "relational": r.relational_bonus,
            "warnings": len(r.conflict_warnings)} for r in results]}

    def rename(self, text: str) -> str:
        return _UUID_REF.sub(lambda m: "V:" + self.name_of.get(m.group(1), m.group(1)), text)

    def events(self) -> list[dict[str, Any]]:
        return [{"type": e.event_type, "vectors": [self.name_of.get(v, v) for v in e.vector_ids],
                 "description": self.rename(e.description), "action": self.rename(e.action_taken)}
                for e in self.db.consolidation_agent.event_log]


def _where(e: BaseException) -> str:
    """``file:line`` of the innermost frame of ``e``'s traceback."""
    tb = traceback.extract_tb(e.__traceback__)
    return f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""


def die_with_parent(harness: int, poll_s: float = 0.5) -> None:
    """Kill this worker within ``poll_s`` of the death of ``harness`` (its parent's pid, as
    the harness gave it), even in the middle of a consolidation pass that would take minutes
    or with its input held open by another process. The harness's own ``exit_with_parent``:
    this file runs without the project on its path."""

    def watch() -> None:
        while os.getppid() == harness:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def main(argv: list[str]) -> None:
    poc_dir, options = argv[1], json.loads(argv[2])
    die_with_parent(int(options.get("harness_pid", os.getppid())))
    out = sys.stdout
    sys.stdout = sys.stderr  # the protocol owns stdout: a stray print goes to stderr
    poc = import_poc(poc_dir)
    from importlib.metadata import version

    worker = Worker(poc, options)

    def send(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    send({"ok": True, "ready": True, "poc_file": Path(poc.__file__).resolve().as_posix(),
          "poc_version": version("smartvector-rag")})
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if req.get("op") == "close":
            break
        try:
            send({"ok": True, **worker.handle(req)})
        except Exception as e:  # noqa: BLE001 - reported to the harness, which raises
            traceback.print_exc()
            send({"ok": False, "error": f"{type(e).__name__}: {e}", "where": _where(e)})


if __name__ == "__main__":
    main(sys.argv)
