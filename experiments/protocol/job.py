"""One configuration's job: label every query at its time (leaving out those whose labels
cannot be right), embed every text once, replay each distinct store once (methods that share a
store answer from the same replay), grade every ranking, and write the results directory
(:mod:`experiments.results.record`): qrels and TREC runs beside the grades."""

from __future__ import annotations

import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from experiments.data.dataset import Dataset
from experiments.methods import Context, Retriever, make_retriever
from experiments.ops.resilience import one_line
from experiments.protocol.context import with_titles
from experiments.protocol.evaluate import method_metrics, paired_tests, timing_metrics
from experiments.protocol.labels import label_dataset, write_labels
from experiments.protocol.memo import MemoEmbedder
from experiments.protocol.metrics import RELIABILITY_PLOT, plot_predictions_reliability
from experiments.protocol.ranking import chunk_run, per_query, run_lines
from experiments.protocol.reembed import edit_costs
from experiments.protocol.replay import grade_run, replay_shared, run_rows
from experiments.results.provenance import git_commit, package_versions
from experiments.results.record import (
    CONFIG_FILE,
    LEFT_OUT_FILE,
    PREDICTIONS_FILE,
    RUN_FILE,
    RUNS_DIR,
    CorpusSummary,
    MethodResult,
    RunResults,
    write_results,
)
from experiments.settings import Settings
from smartvector.chunking import chunk_text
from smartvector.embedders import make_embedder

_EMBEDDERS: dict[tuple, Any] = {}


def shared_embedder(e: DictConfig, base: Path) -> Any:
    """One embedder (and model) per process: the jobs of a sweep that run in this process
    load the model once."""
    cache = str((base / e.cache_path).resolve()) if e.cache_path else None
    key = (e.name, cache, e.backend, e.path)
    if key not in _EMBEDDERS:
        kw = {"path": str(base / e.path)} if e.path else {}
        if e.backend and e.name != "hashing":
            kw["backend"] = e.backend
        _EMBEDDERS[key] = make_embedder(e.name, cache, **kw)
    return _EMBEDDERS[key]


def index_options(cfg: DictConfig) -> tuple[tuple[str, int], ...]:
    """The index's constructor options from ``protocol`` (hnswlib's; none for exact)."""
    p = cfg.protocol
    if p.index != "hnsw":
        return ()
    return (("M", p.hnsw_m), ("ef_construction", p.hnsw_ef_construction),
            ("ef_search", p.hnsw_ef))


def share_groups(retrievers: list[Retriever], feedback: bool) -> list[list[Retriever]]:
    """The retrievers grouped by shared state (config order kept within and across groups);
    with feedback every method keeps its own state."""
    groups: dict[Any, list[Retriever]] = {}
    for i, r in enumerate(retrievers):
        key = None if feedback else r.state_key()
        groups.setdefault(("own", i) if key is None else key, []).append(r)
    return list(groups.values())


def evaluate(cfg: DictConfig, settings: Settings, ds: Dataset, out_dir: Path, base: Path,
             config_fingerprint: str, source: str) -> RunResults:
    """Run every method, grade, and write the results directory (``results.json`` last).
    A method that raises ends the replays; what finished is kept and the error recorded."""
    out_dir = Path(out_dir)
    loaded_out = len(ds.unanswerable)
    if cfg.protocol.chunk_context == "title":
        ds = with_titles(ds, settings.store.max_chunk_chars)
    ds, labels = label_dataset(ds, settings.store.max_chunk_chars)
    write_labels(out_dir, ds, labels)
    (out_dir / RUNS_DIR).mkdir(exist_ok=True)
    embedder = MemoEmbedder(shared_embedder(cfg.embedder, base))
    chunks = {c.text for v in ds.corpus
              for c in chunk_text(v.text, settings.store.max_chunk_chars)}
    embedder.encode(sorted(chunks) + [q.text for q in ds.queries])  # one large batch
    qvecs = dict(zip([q.id for q in ds.queries],
                     embedder.encode([q.text for q in ds.queries]), strict=True))
    p = cfg.protocol
    ctx = Context(embedder, settings.store, p.index, index_options(cfg))
    outcomes: dict[str, dict[str, Any]] = {}
    error: dict[str, str] | None = None
    names = list(settings.methods)
    phase = ""  # the method at work, named by an error
    with tqdm(total=len(names), desc="methods", unit="method", file=sys.stderr) as bar:
        try:
            retrievers = []
            for phase in names:
                retrievers.append(make_retriever(phase, settings.methods[phase], ctx))
            for group in share_groups(retrievers, p.feedback_rate > 0):
                phase = group[0].name
                replays = replay_shared(ds, group, qvecs, k=p.k, schedule=settings.schedule,
                                        mode=p.mode, feedback_rate=p.feedback_rate,
                                        seed=cfg.seed)
                for r, res in zip(group, replays, strict=True):
                    phase = r.name
                    pred = pd.DataFrame(grade_run(ds, res))
                    pred = pred.join(per_query(res, labels), on="query_id")
                    (out_dir / RUNS_DIR / f"{r.name}.txt").write_text(
                        "".join(run_lines(chunk_run(res, labels), r.name)))
                    outcomes[r.name] = {
                        "result": MethodResult(r.recorded_params, method_metrics(
                            pred, seed=cfg.seed, n_boot=cfg.n_boot), timing_metrics(res)),
                        "predictions": pred, "run": run_rows(res), "vectors": res.n_vectors}
                    bar.update()
        except Exception as e:  # noqa: BLE001 - keep what finished, then fail the run
            error = {"phase": f"method {phase}", "message": one_line(e)}
    reembed: dict[str, float] = {}
    if error is None and cfg.reembed.n_edits > 0:
        try:
            reembed = edit_costs(ds, cfg.reembed.n_edits, cfg.seed, cfg.reembed.window,
                                 cfg.reembed.overlap)
        except Exception as e:  # noqa: BLE001 - the methods' results are kept
            error = {"phase": "re-embedding study", "message": one_line(e)}
    done = [n for n in names if n in outcomes]
    frames = [outcomes[n]["predictions"] for n in done]
    pred = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["query_id", "method", "kind", "grade", "probability"])
    tests = paired_tests(pred) if frames else {}
    methods = {}
    for n in done:
        m = outcomes[n]["result"]
        methods[n] = MethodResult(m.params, {**m.quality, **tests.get(n, {})}, m.timing)
    summary = ds.summary()
    corpus = CorpusSummary(str(cfg.dataset.kind), summary["documents"], summary["versions"],
                           len(ds.queries), summary["injected"],
                           outcomes[done[0]]["vectors"] if done else 0, ds.fingerprint(),
                           source, unanswerable=loaded_out, label_problems=len(labels.problems))
    pd.DataFrame(ds.unanswerable, columns=["query_id", "reason"]).to_csv(
        out_dir / LEFT_OUT_FILE, index=False)
    (out_dir / CONFIG_FILE).write_text(OmegaConf.to_yaml(cfg, resolve=True))
    pred.to_csv(out_dir / PREDICTIONS_FILE, index=False)
    rows = [r for n in done for r in outcomes[n]["run"]]
    pd.DataFrame(rows, columns=["query_id", "method", "rank", "vector_id", "doc_id",
                                "score"]).to_csv(out_dir / RUN_FILE, index=False)
    if done and cfg.plots.reliability:
        plot_predictions_reliability(pred, out_dir / RELIABILITY_PLOT,
                                     f"Reliability of the top-1 score ({cfg.study}, seed "
                                     f"{cfg.seed})")
    results = RunResults(cfg.study, int(cfg.seed), config_fingerprint, corpus, methods,
                         reembed, error, provenance(base))
    write_results(out_dir, results)
    return results


def provenance(base: Path) -> dict[str, str]:
    """The code and machine behind a result, and a unique id of this execution."""
    return {"git_commit": git_commit(base), "host": socket.gethostname(),
            "results_uid": uuid.uuid4().hex,
            **{f"version.{k}": v for k, v in package_versions().items()}}
