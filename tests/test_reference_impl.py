"""The paper's reference implementation (PyPI ``smartvector-rag`` 0.1.1) as a method row
(``experiments/methods/reference_impl.py``): replayed on tiny hand-made corpora through the
harness's replay. With the work-arounds it answers with the latest version; with the wall
clock everything is dormant; the shipped conflict crash is counted, not fatal, and the
identity vote gives the shipped resolution; the fast scans give the shipped conflicts and
relationships; parameters, installation and a dead worker fail with one line.

The PoC is installed into ``.cache/poc`` (pip, from the registry) on first use; these tests
are skipped, with the reason, only if that install fails. Its import package shadows this
project's, so everything that imports it runs in a subprocess."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from experiments.data.dataset import Dataset, DocVersion, Query
from experiments.methods import (
    Context,
    MissingExtraError,
    QueryInput,
    kinds,
    make_params,
    make_retriever,
)
from experiments.methods.reference_impl import (
    POC_SPEC,
    WORKER,
    ReferenceImplParams,
    ReferenceImplRetriever,
    ensure_poc,
    poc_path,
)
from experiments.ops.resilience import process_alive
from experiments.protocol.replay import grade_run, replay
from smartvector import HashingEmbedder

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2024, 1, 1, tzinfo=UTC)
EMB = HashingEmbedder(dim=16)


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def ts(n: float) -> float:
    return day(n).timestamp()


@pytest.fixture(scope="module")
def poc_dir() -> Path:
    try:
        return ensure_poc(poc_path(ReferenceImplParams()))
    except (OSError, RuntimeError) as e:
        pytest.skip(f"could not install {POC_SPEC} into .cache/poc: {e}")


@pytest.fixture
def make(poc_dir):
    """``make(**params)``: a fresh ``smartvector_rag`` retriever, its worker closed after
    the test."""
    made: list[ReferenceImplRetriever] = []

    def build(name: str = "paper_code", **params) -> ReferenceImplRetriever:
        r = make_retriever(name, {"kind": "smartvector_rag", **params}, Context(EMB))
        made.append(r)
        return r

    yield build
    for r in made:
        r.close()


def vectors_of(ds: Dataset) -> dict[str, np.ndarray]:
    return dict(zip([q.id for q in ds.queries], EMB.encode([q.text for q in ds.queries]),
                    strict=True))


def ranking_rows(res) -> list[tuple]:
    """Every hit of every query with everything the method returned."""
    return [(q.id, i, h.vector_id, h.doc_id, h.text, h.score, tuple(sorted(h.signals.items())))
            for q, r in res.run for i, h in enumerate(r.hits)]


# --- a versioned corpus: 2 documents x 3 versions, dated 2024 --------------------------------

API = "The API rate limit is {} requests per second for every client."
PLAN = "The basic plan costs {} dollars per month and includes email support."
VERSIONED = [("api", 1, API.format(100), 0), ("pricing", 1, PLAN.format(10), 1),
             ("api", 2, API.format(200), 10), ("pricing", 2, PLAN.format(12), 11),
             ("api", 3, API.format(500), 20), ("pricing", 3, PLAN.format(15), 21)]


def versioned() -> Dataset:
    corpus = [DocVersion(d, v, text, day(t), source_type="technical_doc", authority=0.85,
                         author="alice") for d, v, text, t in VERSIONED]
    queries = [Query("q-api", "what is the api rate limit per second", day(25), ("api",),
                     "500 requests", ("200 requests", "100 requests")),
               Query("q-plan", "how many dollars per month does the basic plan cost",
                     day(25), ("pricing",), "15 dollars", ("12 dollars", "10 dollars"))]
    return Dataset(corpus, queries)


def test_workarounds_answer_with_the_latest_version(make) -> None:
    ds = versioned()
    r = make()
    res = replay(ds, r, vectors_of(ds))
    assert res.chunks_ingested == r.size == 6  # one PoC chunk per version
    assert r.consolidation_passes == res.consolidations > 0
    assert r.consolidation_errors == 0
    by_q = {q.id: ranking for q, ranking in res.run}
    top = by_q["q-api"].hits[0]
    assert (top.doc_id, top.vector_id, top.text) == ("api", "api@v3#0", API.format(500))
    assert by_q["q-plan"].hits[0].vector_id == "pricing@v3#0"
    # the earlier versions were deprecated: only the two latest chunks are left
    for ranking in by_q.values():
        assert sorted(h.vector_id for h in ranking.hits) == ["api@v3#0", "pricing@v3#0"]
        assert 0 < ranking.probability == ranking.hits[0].score <= 1
        assert set(ranking.hits[0].signals) == {"semantic", "temporal", "confidence",
                                                "relational"}
    assert [p["grade"] for p in grade_run(ds, res)] == ["correct", "correct"]
    params = r.recorded_params
    assert params["consolidation_errors"] == 0
    assert params["consolidation_passes"] == res.consolidations
    assert params["simulated_clock"] and params["avoid_conflict_crash"]


def test_the_wall_clock_makes_every_2024_chunk_dormant(make) -> None:
    ds = versioned()
    r = make(simulated_clock=False)
    res = replay(ds, r, vectors_of(ds))
    assert all(ranking.hits == [] and math.isnan(ranking.probability)
               for _, ranking in res.run)
    assert [p["grade"] for p in grade_run(ds, res)] == ["wrong", "wrong"]
    events = r.events()
    assert {e["vectors"][0] for e in events if e["type"] == "dormancy"} == {
        f"{d}@v{v}#0" for d, v, _, _ in VERSIONED}


# --- conflicts -----------------------------------------------------------------------------

REFUND_30 = "The refund window is 30 days for all orders."
REFUND_14 = "For all orders the window for a refund is now 14 days."  # Jaccard .43, ratio .31


def conflicting() -> Dataset:
    corpus = [DocVersion("refund-policy", 1, REFUND_30, day(0), source_type="policy_doc"),
              DocVersion("faq", 1, REFUND_14, day(0.5), source_type="wiki"),
              DocVersion("refund-policy", 2, REFUND_30.replace("30", "21"), day(5),
                         source_type="policy_doc")]
    queries = [Query("q1", "how many days is the refund window for all orders", day(2),
                     ("refund-policy",), "30 days"),
               Query("q2", "how many days is the refund window for all orders", day(7),
                     ("refund-policy",), "21 days", ("30 days",))]
    return Dataset(corpus, queries)


def test_the_shipped_conflict_crash_is_counted_and_the_replay_goes_on(make) -> None:
    ds = conflicting()
    shipped = make("paper_code_crash", avoid_conflict_crash=False)
    res = replay(ds, shipped, vectors_of(ds))
    print(f"consolidation passes {shipped.consolidation_passes}, errors "
          f"{shipped.consolidation_errors}: {shipped.consolidation_log}")
    assert shipped.consolidation_passes == res.consolidations == 2
    assert shipped.consolidation_errors == 2  # every pass meets the pair
    assert shipped.recorded_params["consolidation_errors"] == 2
    assert shipped.consolidation_log[0] == {
        "error": "TypeError: unhashable type: 'SmartVector'", "where": "consolidation.py:135"}
    # the aborted passes promoted nothing: version 1 stays in force next to version 2
    assert {h.vector_id for h in res.run[-1][1].hits} >= {"refund-policy@v1#0",
                                                          "refund-policy@v2#0"}
    fixed = make()
    res_fixed = replay(ds, fixed, vectors_of(ds))
    assert fixed.consolidation_errors == 0
    assert [e["vectors"] for e in fixed.events() if e["type"] == "conflict"][0] == [
        "refund-policy@v1#0", "faq@v1#0"]
    assert "refund-policy@v1#0" not in {h.vector_id for h in res_fixed.run[-1][1].hits}


# The rest compare against the shipped code itself, in a subprocess with the PoC on the path:
# the Worker of reference_impl_worker.py driven directly, or the detectors and builders on
# hand-made vectors. "hashable" gives SmartVector identity hashing (the other work-around
# of docs/smartvector_rag.md), so the shipped resolution runs instead of raising.
SCRIPT = r"""
import importlib.util, json, sys
from datetime import datetime
spec = importlib.util.spec_from_file_location("worker", sys.argv[1])
w = importlib.util.module_from_spec(spec)
spec.loader.exec_module(w)
job = json.load(sys.stdin)
poc = w.import_poc(job["poc_dir"])
if job["hashable"]:
    poc.SmartVector.__hash__ = object.__hash__
out = {}
if job["mode"] == "requests":
    worker = w.Worker(poc, job["options"])
    out["answers"] = [worker.handle(r) for r in job["requests"]]
    out["events"] = worker.events()
else:
    vectors = [poc.SmartVector(**{**v, "created_at": datetime.fromisoformat(v["created_at"]),
                                  "status": poc.VectorStatus(v["status"])})
               for v in job["vectors"]]
    c = w.poc_classes(poc)
    for name, det in [("shipped", poc.ConflictDetector()),
                      ("fast", c.FastConflictDetector()),
                      ("identity", c.IdentityVoteDetector()),
                      ("fast_identity", c.FastIdentityVoteDetector())]:
        for th in job["topic_thresholds"]:
            out[f"conflicts.{name}.{th}"] = det.detect_conflicts(vectors, topic_threshold=th)
    for name, b in [("shipped", poc.RelationshipBuilder()),
                    ("fast", c.FastRelationshipBuilder())]:
        for th in job["similarity_thresholds"]:
            out[f"relationships.{name}.{th}"] = b.build_relationships(
                vectors, similarity_threshold=th)
print(json.dumps(out))
"""


def run_poc_script(poc_dir: Path, job: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(poc_dir), "PYTHONNOUSERSITE": "1", "TZ": "UTC"}
    out = subprocess.run([sys.executable, "-S", "-P", "-c", SCRIPT, str(WORKER)],
                         input=json.dumps({"poc_dir": str(poc_dir), **job}), env=env,
                         capture_output=True, text=True, cwd="/", check=False, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


OPTIONS = {"simulated_clock": True, "avoid_conflict_crash": True, "fast_conflict_scan": False,
           "fast_relationship_scan": False}
CONFLICT_DOCS = [
    ("refund-policy", 1, REFUND_30, "policy_doc", 0.9, 0),
    ("faq", 1, REFUND_14, "wiki", 0.75, 0.5),
    ("chat-log", 1, "Someone said the window for a refund on all orders is 60 days now.",
     "slack", 0.3, 1.5),
    ("refund-policy", 2, REFUND_30.replace("30", "21"), "policy_doc", 0.9, 5),
    ("faq", 2, "For all orders the window for a refund is now 21 days.", "wiki", 0.75, 6.5),
]
QUESTION = "how many days is the refund window for all orders"


def conflict_requests(feedback: bool = True) -> list[dict]:
    reqs: list[dict] = []
    for i, (d, v, text, source, authority, t) in enumerate(CONFLICT_DOCS):
        reqs.append({"op": "ingest", "doc_id": d, "version": v, "text": text,
                     "source_type": source, "author": "bob", "authority": authority,
                     "ts": ts(t)})
        reqs.append({"op": "consolidate", "at": ts(t + 1)})
        reqs.append({"op": "query", "text": QUESTION, "at": ts(t + 1.5), "k": 5})
        if feedback and i == 1:  # the FAQ wins the feedback vote against the chat log
            reqs.append({"op": "feedback", "vector_id": "faq@v1#0", "accepted": True})
    return reqs


def test_identity_vote_gives_the_shipped_resolution_and_rankings(poc_dir) -> None:
    reqs = conflict_requests()
    voted = run_poc_script(poc_dir, {"mode": "requests", "hashable": False,
                                     "options": OPTIONS, "requests": reqs})
    shipped = run_poc_script(poc_dir, {"mode": "requests", "hashable": True, "options": {
        **OPTIONS, "avoid_conflict_crash": False}, "requests": reqs})
    # identical answers (hits, scores, signals, pass summaries) and event log, resolutions
    # ("Preferred: ...") included
    assert voted == shipped
    conflicts = [e for e in voted["events"] if e["type"] == "conflict"]
    assert len(conflicts) >= 3
    assert any(a.get("conflicts_found") for a in voted["answers"])
    assert all(a.get("error") is None for a in voted["answers"] if "error" in a)
    # as shipped (not hashable), the same passes raise from the first conflicting pair on
    crashed = run_poc_script(poc_dir, {"mode": "requests", "hashable": False, "options": {
        **OPTIONS, "avoid_conflict_crash": False}, "requests": reqs})
    errors = [a for a in crashed["answers"] if a.get("error")]
    assert errors and errors[0]["where"] == "consolidation.py:135"


def test_the_retriever_answers_like_the_worker_it_drives(make, poc_dir) -> None:
    """The harness side adds nothing: its rankings are the worker's answers."""
    reqs = conflict_requests(feedback=False)
    direct = run_poc_script(poc_dir, {"mode": "requests", "hashable": False,
                                      "options": OPTIONS, "requests": reqs})
    r = make(fast_conflict_scan=False, fast_relationship_scan=False)
    got = []
    for req in reqs:
        if req["op"] == "ingest":
            r.ingest(DocVersion(req["doc_id"], req["version"], req["text"],
                                datetime.fromtimestamp(req["ts"], UTC),
                                source_type=req["source_type"], authority=req["authority"],
                                author=req["author"]))
        elif req["op"] == "consolidate":
            r.consolidate(req["at"])
        else:
            ranking = r.search(QueryInput("q", req["text"], EMB.encode([req["text"]])[0],
                                          req["at"]), req["at"], req["k"])
            got.append([(h.vector_id, h.doc_id, h.text, h.score, h.signals["semantic"],
                         h.signals["temporal"], h.signals["confidence"],
                         h.signals["relational"]) for h in ranking.hits])
    want = [[(h["vector_id"], h["doc_id"], h["text"], h["score"], h["semantic"],
              h["temporal"], h["confidence"], h["relational"]) for h in a["hits"]]
            for a in direct["answers"] if "hits" in a]
    assert got == want and all(got)
    assert r.events() == direct["events"]


# --- the fast scans give the shipped output --------------------------------------------------

SENTENCES = [
    REFUND_30, REFUND_14, "The refund window is 14 days for all orders.",
    "Refunds for all orders are processed within 5 days of the request.",
    "The VPN gateway is vpn-alpha and requires the corporate client.",
    "The corporate client is required for the VPN gateway, which is now vpn-beta.",
    "VPN sessions time out after 8 hours of inactivity.",
    "After 4 hours of inactivity VPN sessions time out.",
    "Employees accrue 20 days of paid leave per year.",
    "Paid leave per year accrues at 25 days for employees.",
    "Unused leave expires at the end of March.", "",
]
STATUSES = ["active", "unconsolidated", "active", "deprecated", "dormant", "active"]


def scan_vectors() -> list[dict]:
    """Chunks of a few documents and versions: statuses, authorities, times and feedback
    vary so that votes split both ways; some chunks share a document and version."""
    out = []
    for i, text in enumerate(SENTENCES * 2):
        out.append({
            "vector_id": f"v{i:02d}", "doc_id": f"doc{i % 5}", "doc_version": 1 + i // 10,
            "chunk_index": i % 3, "content": text if i < 12 else text.upper(),
            "base_confidence": [0.9, 0.75, 0.75, 0.3][i % 4],
            "created_at": day(i * 3 % 17).replace(tzinfo=None).isoformat(),
            "status": STATUSES[i % len(STATUSES)], "positive_feedback": i % 3,
            "negative_feedback": i % 2, "source_offset_start": 10 * (i % 4),
            "source_offset_end": 10 * (i % 4) + len(text)})
    return out


def test_fast_scans_find_the_shipped_conflicts_and_relationships(poc_dir) -> None:
    topic, sim = [0.0, 0.3, 0.5], [-1.0, 0.0, 0.35, 0.6]
    out = run_poc_script(poc_dir, {"mode": "scan", "hashable": True, "vectors": scan_vectors(),
                                   "topic_thresholds": topic, "similarity_thresholds": sim})
    for th in topic:
        shipped = out[f"conflicts.shipped.{th}"]
        assert out[f"conflicts.fast.{th}"] == shipped
        assert out[f"conflicts.identity.{th}"] == shipped  # the same resolutions too
        assert out[f"conflicts.fast_identity.{th}"] == shipped
    assert len(out["conflicts.shipped.0.3"]) >= 3
    assert {c["resolution"]["confidence"] for c in out["conflicts.shipped.0.3"]} == {
        "high", "medium"}
    for th in sim:
        assert out[f"relationships.fast.{th}"] == out[f"relationships.shipped.{th}"]
    kinds_found = {r["type"] for r in out["relationships.shipped.0.35"]}
    assert kinds_found == {"supersession", "dependency"}


def test_fast_scans_give_the_same_replay(make) -> None:
    corpus = [DocVersion(d, v, text, day(t), source_type=source, authority=authority)
              for d, v, text, source, authority, t in CONFLICT_DOCS]
    corpus += versioned().corpus
    queries = [Query(f"q{i}", text, day(t), (doc,), answer) for i, (text, t, doc, answer) in
               enumerate([(QUESTION, 2, "refund-policy", "30 days"),
                          (QUESTION, 8, "refund-policy", "21 days"),
                          ("what is the api rate limit per second", 25, "api", "500"),
                          ("basic plan dollars per month", 26, "pricing", "15 dollars")])]
    ds = Dataset(sorted(corpus, key=lambda d: d.valid_from), queries)
    runs = {}
    for fast in (False, True):
        r = make(fast_conflict_scan=fast, fast_relationship_scan=fast)
        runs[fast] = (ranking_rows(replay(ds, r, vectors_of(ds))), r.consolidation_log,
                      r.events())
    assert runs[True] == runs[False]
    assert sum(p.get("conflicts_found", 0) for p in runs[True][1]) > 0
    assert sum(p.get("relationships_built", 0) for p in runs[True][1]) > 0


# --- parameters, installation, the worker ---------------------------------------------------


@pytest.mark.parametrize("node, match", [
    ({"simulated_clock": "yes"}, r"^methods\.paper_code: simulated_clock must be true or false"),
    ({"fast_conflict_scan": 1}, r"^methods\.paper_code: fast_conflict_scan must be true or"),
    ({"poc_dir": ""}, r"^methods\.paper_code: poc_dir must be a non-empty path"),
    ({"pool": 5}, r"^methods\.paper_code: unknown key 'pool'"),
])
def test_bad_params_are_one_line_errors(node: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match) as e:
        make_params("paper_code", {"kind": "smartvector_rag", **node})
    assert "\n" not in str(e.value)


def test_shipped_configs() -> None:
    def params(name: str) -> ReferenceImplParams:
        node = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "methods" / f"{name}.yaml"))
        cls, p = make_params(name, node[name])
        assert cls is ReferenceImplRetriever
        return p

    assert params("paper_code") == ReferenceImplParams()
    shipped = params("paper_code_as_shipped")
    assert not shipped.simulated_clock and not shipped.avoid_conflict_crash
    assert shipped.fast_conflict_scan and shipped.fast_relationship_scan  # result-identical


def test_check_is_a_one_line_missing_extra_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(MissingExtraError, match=r"^kind smartvector_rag needs "
                       r"smartvector-rag==0\.1\.1 in .* could not be installed") as e:
        ReferenceImplRetriever.check(ReferenceImplParams(poc_dir=str(blocker / "poc")))
    assert "\n" not in str(e.value)


def test_a_dead_worker_is_a_one_line_error_naming_it(make) -> None:
    r = make()
    r.ingest(DocVersion("api", 1, API.format(100), day(0), source_type="technical_doc"))
    pid = r.worker_pid
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match=rf"^method paper_code: the smartvector-rag worker "
                       rf"\(pid {pid}, reference_impl_worker\.py\) died during query") as e:
        r.search(QueryInput("q", "api", EMB.encode(["api"])[0], ts(1)), ts(1), 5)
    assert "\n" not in str(e.value)


def test_worker_refuses_another_smartvector_package(poc_dir, tmp_path: Path) -> None:
    # PYTHONPATH finds the PoC, but not under the poc_dir the worker was told
    env = {**os.environ, "PYTHONPATH": str(poc_dir), "TZ": "UTC"}
    out = subprocess.run([sys.executable, "-S", "-P", str(WORKER), str(tmp_path), "{}"],
                         env=env, capture_output=True, text=True, cwd="/", input="",
                         check=False, timeout=60)
    assert out.returncode != 0
    assert "imported the wrong smartvector package" in out.stderr


HOLDER = """import json, os, subprocess, sys, time
opts = {"simulated_clock": True, "avoid_conflict_crash": True, "fast_conflict_scan": True,
        "fast_relationship_scan": True, "harness_pid": os.getpid()}
w = subprocess.Popen([sys.executable, "-S", "-P", sys.argv[1], sys.argv[2], json.dumps(opts)],
                     stdin=sys.stdin, stdout=subprocess.PIPE, text=True, cwd="/")
ready = json.loads(w.stdout.readline())["ready"]
print(w.pid, ready, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_the_worker_dies_with_the_harness_even_with_its_input_open(poc_dir) -> None:
    """kill -9 of the harness ends its worker even when the worker's input stays open (here
    the test holds it, as a busy worker would not read it): a consolidation pass of the
    paper's code can take minutes."""
    env = {**os.environ, "PYTHONPATH": str(poc_dir), "TZ": "UTC"}
    harness = subprocess.Popen([sys.executable, "-c", HOLDER, str(WORKER), str(poc_dir)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env=env)
    pid, ready = harness.stdout.readline().split()
    worker = int(pid)
    assert ready == "True" and process_alive(worker)
    harness.kill()
    harness.wait()
    deadline = time.time() + 10
    while process_alive(worker) and time.time() < deadline:
        time.sleep(0.05)
    alive = process_alive(worker)
    if alive:
        os.kill(worker, signal.SIGKILL)
    harness.stdin.close()
    assert not alive


def test_the_harness_never_imports_the_poc(poc_dir) -> None:
    kinds()  # imports every module of experiments.methods, the worker's included
    assert "smartvector_rag" in kinds()
    assert Path(sys.modules["smartvector"].__file__).resolve().is_relative_to(ROOT / "smartvector")
    assert not [m for m, mod in list(sys.modules.items())
                if Path(getattr(mod, "__file__", None) or "/").resolve().is_relative_to(poc_dir)]
