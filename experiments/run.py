"""The harness's front door: ``python -m experiments.run [overrides]``.

Replays one dataset through every selected method, writes ``metrics.json`` and
``predictions.csv`` into the Hydra output directory, logs everything to MLflow and prints a
compact table. Sweeps: ``python -m experiments.run -m seed=0,1,2``.
"""

from __future__ import annotations

if __name__ == "__main__":  # a command-line run: MLflow's process starts loading right away
    import sys

    from experiments.resilience import hold_startup

    if not {"-m", "--multirun"} & set(sys.argv[1:]):
        hold_startup()  # Ctrl-C now acts when the run starts its work (main)
    from experiments.log_worker import prespawn

    prespawn()

import dataclasses
import json
import sys
import uuid
import warnings
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
import pandas as pd
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from smartvector import StoreConfig
from smartvector.chunking import chunk_text
from smartvector.embedders import (
    CachedEmbedder,
    ModelUnavailableError,
    check_available,
    make_embedder,
)

from .config import build_frozen, method_store_config, register
from .corpora.registry import config_of, get_kind
from .dataset import Dataset, DatasetError, load_dataset
from .evaluate import method_metrics, paired_tests, timing_metrics
from .log_worker import BackgroundLogger, discard_prespawned
from .memo import MemoEmbedder
from .method_pool import encode_aside, map_methods, workers_for
from .metrics import RELIABILITY_PLOT, plot_predictions_reliability
from .reembed import edit_costs
from .replay import Schedule, grade_run, replay, run_rows
from .resilience import (
    exit_now,
    fewer_full_collections,
    hold_signals_in_numba_loads,
    interrupt_of,
    quick_worker_exit,
    release_startup,
)
from .retrievers import Context, make_params, make_retriever
from .retrievers.qdrant import MissingExtraError
from .tracking import (
    Terminated,
    Tracker,
    artifact_location_for,
    fingerprint,
    flatten,
    git_commit,
    log_output_dir,
    mark_failed,
    one_line,
    open_for_run,
    package_versions,
    resolve_tracking_uri,
    sigterm_as_interrupt,
    write_record,
)

register()


#: Keys that do not change results (excluded from the configuration fingerprint, so a
#: finished configuration is recognised whatever they are set to).
_NOT_RESULTS = ("mlflow", "plots", "method_workers")
#: the re-embedding costs' task among the methods' (not a method name: those are identifiers)
REEMBED_TASK = "re-embedding study"


class ConfigError(ValueError):
    """A configuration value that cannot run."""


@dataclass
class Settings:
    store: StoreConfig
    methods: dict[str, dict[str, Any]]
    schedule: Schedule


def validate(cfg: DictConfig) -> Settings:
    """Check every value before any work; raises ConfigError with a one-line message."""
    try:
        try:
            store = build_frozen(StoreConfig, OmegaConf.to_container(cfg.store, resolve=True))
        except ValueError as e:  # the library names its own key: say the one the user typed
            raise ValueError(f"store.{e}") from None
        methods = OmegaConf.to_container(cfg.methods, resolve=True)
        if not methods:
            raise ValueError("no methods selected")
        for name, node in methods.items():
            _, params = make_params(name, node)
            method_store_config(name, store, getattr(params, "store", None))
        if cfg.protocol.k < 1:
            raise ValueError(f"protocol.k must be >= 1, got {cfg.protocol.k}")
        if cfg.protocol.index not in ("exact", "hnsw"):
            raise ValueError(f"protocol.index must be 'exact' or 'hnsw', got "
                             f"{cfg.protocol.index!r}")
        if cfg.protocol.mode not in ("replay", "time_travel"):
            raise ValueError(f"protocol.mode must be replay or time_travel, got "
                             f"{cfg.protocol.mode!r}")
        if not 0.0 <= cfg.protocol.feedback_rate <= 1.0:
            raise ValueError(f"protocol.feedback_rate must be in [0, 1], got "
                             f"{cfg.protocol.feedback_rate}")
        if cfg.protocol.feedback_rate > 0 and cfg.protocol.mode != "replay":
            raise ValueError("protocol.feedback_rate needs protocol.mode=replay")
        if cfg.query_split not in ("all", "dev", "test"):
            raise ValueError(f"query_split must be all, dev or test, got {cfg.query_split!r}")
        _check_run_options(cfg)
        kind = get_kind(cfg.dataset.kind)
        kind.check(_dataset_config(cfg))
        e = cfg.embedder
        if e.name not in ("hashing", "minilm", "all-MiniLM-L6-v2", "st"):
            raise ValueError(f"unknown embedder {e.name!r} (choose from: hashing, minilm, st)")
        if e.name == "st" and not e.path:
            raise ValueError("embedder.path is required for embedder=st (a local "
                             "sentence-transformers model directory)")
        if e.name != "hashing":
            path = str(_base() / e.path) if e.path else None
            if e.backend:
                check_available(e.backend, path)
            else:
                check_available(path=path)
        if "qdrant_filter" in {n.get("kind", k) for k, n in methods.items()}:
            from .retrievers.qdrant import check_qdrant

            check_qdrant()
    except (ModelUnavailableError, MissingExtraError) as e:
        raise ConfigError(str(e)) from None
    except (ValueError, TypeError) as e:
        raise ConfigError(str(e)) from None
    if cfg.protocol.mode == "time_travel":  # queries "as of" the past record no accesses
        store = dataclasses.replace(store, record_access=False)
    return Settings(store, methods, Schedule(cfg.protocol.consolidate_daily,
                                             cfg.protocol.consolidate_before_queries))


def _dataset_config(cfg: DictConfig) -> Any:
    return config_of(get_kind(cfg.dataset.kind),
                     OmegaConf.to_container(cfg.dataset, resolve=True))


def load_data(cfg: DictConfig, out_dir: Path) -> Dataset:
    """Materialise the dataset (generate it, or find it) and read it through the loader."""
    kind = get_kind(cfg.dataset.kind)
    path = kind.materialise(_dataset_config(cfg), out_dir, _base())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = load_dataset(path)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    return ds


def _base() -> Path:
    """The directory the user ran from (Hydra may change the working directory)."""
    try:
        return Path(hydra.utils.get_original_cwd())
    except ValueError:  # not under Hydra (tests calling these functions directly)
        return Path.cwd()


def split_queries(ds: Dataset, split: str) -> Dataset:
    """Deterministic dev/test halves of the queries (by a hash of the query id)."""
    if split == "all":
        return ds
    import hashlib

    def is_dev(qid: str) -> bool:
        return hashlib.sha256(qid.encode()).digest()[0] % 2 == 0

    keep = [q for q in ds.queries if is_dev(q.id) == (split == "dev")]
    return Dataset(ds.corpus, keep, ds.path, ds.unanswerable, ds.excluded)


_EMBEDDERS: dict[tuple, Any] = {}


def shared_embedder(name: str, cache_path: str | None, backend: str | None = None,
                    path: str | None = None) -> Any:
    """One embedder (and model) per process: the jobs of a sweep that Hydra runs in this
    process load the model once."""
    key = (name, str(Path(cache_path).resolve()) if cache_path else None, backend, path)
    if key not in _EMBEDDERS:
        kw = {"path": str(_base() / path)} if path else {}
        if backend and name != "hashing":
            kw["backend"] = backend
        _EMBEDDERS[key] = make_embedder(name, cache_path, **kw)
    return _EMBEDDERS[key]


def prefetch_model(cfg: DictConfig) -> bool:
    """Cold start: when the run will have to embed with a model whose one-time OpenVINO
    conversion is missing (the embedding cache holds nothing for it), start the conversion
    now in a background process, so that it overlaps MLflow's start-up and the dataset
    instead of following them. Best effort; True if a conversion was started."""
    e = cfg.embedder
    if e.name == "hashing" or (e.backend or "openvino") != "openvino":
        return False
    try:
        embedder = shared_embedder(e.name, e.cache_path, e.backend, e.path)
        if isinstance(embedder, CachedEmbedder):
            if embedder.holds_any():
                return False
            embedder = embedder.inner
        start = getattr(embedder, "start_export", None)
        return bool(start and start())
    except Exception:  # noqa: BLE001 - the first encode() converts and reports problems
        return False


def evaluate_run(cfg: DictConfig, settings: Settings, out_dir: Path,
                 stop: Callable[[bool], bool] | None = None, plot: bool = True
                 ) -> dict[str, Any]:
    """Run every method, grade their runs, and write metrics.json, predictions.csv, run.csv
    and (``plots.reliability`` and ``plot``) the reliability plot. ``stop``, if given, is
    called before each method (while methods replay side by side: every 50 ms; see
    :func:`~experiments.method_pool.map_methods`) with ``stop(False)`` (answer now; True
    once the run is known to go on, which lets the methods replay side by side), and before
    anything is written (``stop(True)``: may wait); an exception it raises abandons the run
    (nothing is written)."""
    ds = split_queries(load_data(cfg, out_dir), cfg.query_split)
    e = cfg.embedder
    embedder = MemoEmbedder(shared_embedder(e.name, e.cache_path, e.backend, e.path))
    # every chunk of every version and every query, embedded once in large batches (the
    # stores then ask per version and hit the memo)
    chunks = {c.text for v in ds.corpus
              for c in chunk_text(v.text, settings.store.max_chunk_chars)}
    texts = sorted(chunks) + [q.text for q in ds.queries]
    names = list(settings.methods)
    single_run = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.RUN
    workers = workers_for(cfg.method_workers, single_run, len(names))
    if workers > 1 and e.name != "hashing":  # (the model's runtime would forbid the workers)
        encode_aside(embedder.inner, texts)
    embedder.encode(texts)
    qvecs = dict(zip([q.id for q in ds.queries],
                     embedder.encode([q.text for q in ds.queries]), strict=True))
    ctx = Context(embedder, settings.store, cfg.protocol.index)

    reembed_task = cfg.reembed.n_edits > 0

    def replay_method(name: str) -> dict[str, Any]:
        """One method's replay, graded and scored, or (:data:`REEMBED_TASK`) the re-embedding
        costs of one-word edits (picklable: it may run in a worker process, beside the
        methods)."""
        if name == REEMBED_TASK:
            try:
                return {"reembed": edit_costs(ds, cfg.reembed.n_edits, cfg.seed,
                                              cfg.reembed.window, cfg.reembed.overlap)}
            except Exception as e:  # noqa: BLE001 - the methods' results are kept
                return {"error": one_line(e)}
        try:
            retriever = make_retriever(name, settings.methods[name], ctx)
            res = replay(ds, retriever, qvecs, k=cfg.protocol.k, schedule=settings.schedule,
                         mode=cfg.protocol.mode, feedback_rate=cfg.protocol.feedback_rate,
                         seed=cfg.seed)
            pred = pd.DataFrame(grade_run(ds, res))
            return {"params": retriever.recorded_params, "predictions": pred,
                    "quality": method_metrics(pred, seed=cfg.seed, n_boot=cfg.n_boot),
                    "run": run_rows(res), "timing": timing_metrics(res),
                    "vectors": res.n_vectors}
        except Exception as e:  # noqa: BLE001 - keep what finished, then fail the run
            return {"error": one_line(e)}

    slow = [n for n in names if make_params(n, settings.methods[n])[0].starts_slowly]
    frames, runs, outcomes, reembed = [], [], {}, {}
    error: dict[str, str] | None = None
    ready = None if stop is None else lambda: stop(False)
    with (tqdm(total=len(names), desc="methods", unit="method", file=sys.stderr) as bar,
          closing(map_methods([*names, *[REEMBED_TASK] * reembed_task], replay_method,
                              workers, first=slow, ready=ready)) as replayed):
        for name, out in replayed:
            if name == REEMBED_TASK:  # (last: every method replayed without error)
                if "error" in out:
                    error = {"phase": "re-embedding study", "message": out["error"]}
                reembed = out.get("reembed", {})
                continue
            if "error" in out:
                error = {"phase": f"method {name}", "message": out["error"]}
                break
            outcomes[name] = out
            frames.append(out["predictions"])
            runs.append(pd.DataFrame(out["run"]))
            bar.update()
    done = list(outcomes)
    pred = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["query_id", "method", "kind", "grade", "probability"])
    tests = paired_tests(pred) if frames else {}
    per_method = {}
    for name in done:
        m = {**outcomes[name]["quality"], **tests.get(name, {})}
        per_method[name] = {"quality": m, "timing": outcomes[name]["timing"],
                            "params": outcomes[name]["params"]}
    summary = ds.summary()
    corpus = {
        "documents": summary.get("documents"), "versions": summary.get("versions"),
        "queries": len(ds.queries), "injected": summary.get("injected"),
        "vectors": outcomes[done[0]]["vectors"] if done else 0,
        "fingerprint": ds.fingerprint(),
    }
    metrics = {"corpus": corpus, "reembed": reembed, "methods": per_method}
    if error is not None:
        metrics["error"] = error
    if stop is not None:
        stop(True)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    pred.to_csv(out_dir / "predictions.csv", index=False)
    if runs:
        pd.concat(runs, ignore_index=True).to_csv(out_dir / "run.csv", index=False)
    if done and cfg.plots.reliability and plot:
        plot_predictions_reliability(pred, out_dir / RELIABILITY_PLOT, reliability_title(cfg))
    return metrics


def reliability_title(cfg: DictConfig) -> str:
    return f"Reliability of the top-1 score ({cfg.study}, seed {cfg.seed})"


def regime(cfg: DictConfig, settings: Settings) -> str:
    """One line naming the protocol choices that move results: the dataset's axes, the
    protocol, and each method's pool."""
    d = cfg.dataset
    parts = [f"dataset={d.kind}"]
    for key in ("query_timing", "after_change_days", "contradiction_rate", "off_topic_share",
                "rumor_recent_prob", "supersession", "validity_windows", "split"):
        if key in d and not (key == "after_change_days" and d.get("query_timing")
                             != "after_change"):
            parts.append(f"{key}={d[key]}")
    parts.append(f"mode={cfg.protocol.mode}")
    pools = {n: p["pool"] for n, p in settings.methods.items() if p.get("pool") is not None}
    if pools:
        distinct = sorted(set(pools.values()))
        parts.append("pool=" + (str(distinct[0]) if len(distinct) == 1 else
                                ",".join(f"{n}:{v}" for n, v in pools.items())))
    return "regime: " + " ".join(parts)


def print_table(metrics: dict[str, Any]) -> None:
    rows = []
    for name, m in metrics["methods"].items():
        q = m["quality"]
        rows.append({"method": name,
                     **{k: f"{q[k]:.3f} [{q[k + '_ci_lo']:.2f},{q[k + '_ci_hi']:.2f}]"
                        for k in ("top1_accuracy", "stale_rate")},
                     "contradicted": f"{q['contradicted_rate']:.3f}",
                     "ece": f"{q['ece']:.3f}", "p50_ms": f"{m['timing']['latency_p50_ms']:.2f}"})
    c = metrics["corpus"]
    print(f"corpus: {c['vectors']} vectors, {c['documents']} documents, {c['queries']} queries")
    if rows:
        print(pd.DataFrame(rows).to_string(index=False))
    r = metrics["reembed"]
    if not r:
        return
    print("chunks re-embedded per one-word edit: "
          f"full {r['reembed_full_reindex']:.2f}, hash-dedup (fixed windows) "
          f"{r['reembed_hash_dedup_window']:.2f}, surgical {r['reembed_surgical']:.2f}")


def _check_run_options(cfg: DictConfig) -> None:
    """Run-level values no library constructor sees (ValueError with a one-line message)."""
    if cfg.n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {cfg.n_boot}")
    if cfg.method_workers < 0:
        raise ValueError(f"method_workers must be >= 0 (0: one per core in a single run, 1 "
                         f"in a sweep), got {cfg.method_workers}")
    r = cfg.reembed
    if r.n_edits < 0:
        raise ValueError(f"reembed.n_edits must be >= 0 (0 skips it), got {r.n_edits}")
    if r.window < 1 or not 0 <= r.overlap < r.window:
        raise ValueError(f"reembed needs window >= 1 and 0 <= overlap < window, got window "
                         f"{r.window}, overlap {r.overlap}")
    if cfg.mlflow.enabled and not str(cfg.mlflow.experiment).strip():
        raise ValueError("mlflow.experiment must not be empty")


def run_record(cfg: DictConfig, metrics: dict[str, Any], out_dir: Path, cfg_fp: str,
               tracking_uri: str, artifact_location: Path,
               pending: tuple[str, ...] = ()) -> dict[str, Any]:
    """What to log for this run (written to ``mlflow_run.json`` next to ``metrics.json``);
    ``pending``: files still to be written (the reliability plot, drawn by the logging
    process)."""
    container = OmegaConf.to_container(cfg, resolve=True)
    tags = {"config_fingerprint": cfg_fp, "git_commit": git_commit(Path.cwd()),
            "dataset_fingerprint": metrics["corpus"]["fingerprint"], "study": cfg.study,
            "run_uid": uuid.uuid4().hex, "output_dir": str(out_dir.resolve()),
            **{f"version.{k}": v for k, v in package_versions().items()}}
    if (out_dir / "dataset" / "corpus.jsonl").exists():
        corpus = "dataset/corpus.jsonl"
    else:
        corpus = str((_base() / cfg.dataset.path / "corpus.jsonl").resolve())
    return {
        "format": 1, "name": f"{cfg.study}-seed{cfg.seed}-{cfg_fp[:6]}",
        "experiment": cfg.mlflow.experiment, "tracking_uri": tracking_uri,
        "artifact_location": str(artifact_location), "tags": tags, "params": flatten(container),
        "dataset": {"corpus": corpus, "name": str(cfg.dataset.kind),
                    "digest": metrics["corpus"]["fingerprint"]},
        "artifacts": [a for a in ("metrics.json", "predictions.csv", "run.csv",
                                  RELIABILITY_PLOT, ".hydra/config.yaml")
                      if (out_dir / a).exists() or a in pending],
    }


def log_to_mlflow(out_dir: Path, tracker: Tracker) -> str:
    """Log a finished output directory: a parent run with a nested run per method.

    Everything is read from the directory (``mlflow_run.json``, ``metrics.json`` and the
    files), exactly as ``python -m experiments.import_runs`` does for runs that could not be
    logged live, so both paths log the same runs. Returns the parent run's id.
    """
    return log_output_dir(out_dir, tracker)


def _dataset_fingerprint(cfg: DictConfig, base: Path) -> str | None:
    """For a dataset read in place (not generated), load (validate) it now, before any MLflow
    or model work: a bad corpus stops the run with a one-line DatasetError. Returns its
    content fingerprint."""
    if get_kind(cfg.dataset.kind).generated:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # load_data reports them during the run
        return load_dataset(base / cfg.dataset.path).fingerprint()


def config_fingerprint(cfg: DictConfig, data_fp: str | None) -> str:
    """The configuration's fingerprint: every resolved key that can change a result
    (:data:`_NOT_RESULTS` left out) and, for a dataset read in place, its content
    fingerprint (``data_fp``, from :func:`_dataset_fingerprint`)."""
    container = OmegaConf.to_container(cfg, resolve=True)
    results = {k: v for k, v in container.items() if k not in _NOT_RESULTS}
    if data_fp is not None:  # the same config on edited data is a different configuration
        results["dataset_content"] = data_fp
    return fingerprint(results)


def _import_hint(reason: str, uri: str) -> str:
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    where = Path(hc.sweep.dir if multirun else hc.runtime.output_dir)
    return (f"warning: not logged to MLflow ({reason}); the results are in {where}; when the "
            f"server is back run: python -m experiments.import_runs {where} "
            f"(add --tracking-uri URI to log elsewhere than {uri})")


def _run(cfg: DictConfig, settings: Settings) -> float | None:
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    base = Path(hydra.utils.get_original_cwd())
    try:
        data_fp = _dataset_fingerprint(cfg, base)
    except DatasetError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    cfg_fp = config_fingerprint(cfg, data_fp)
    uri = resolve_tracking_uri(cfg.mlflow.tracking_uri, base)
    artifact_location = artifact_location_for(uri, cfg.mlflow.artifact_location, base)
    if (cfg.mlflow.enabled and cfg.mlflow.background
            and HydraConfig.get().mode == RunMode.RUN):
        return _run_logging_in_background(cfg, settings, out_dir, cfg_fp, uri,
                                          artifact_location)
    discard_prespawned()
    tracker, offline = None, None
    if cfg.mlflow.enabled:
        status, tracker = open_for_run(uri, cfg.mlflow.experiment, artifact_location, cfg_fp,
                                       cfg.mlflow.skip_finished)
        done = _announce(status)
        if done:
            _print_skipped(cfg, cfg_fp, done)
            return None
        offline = status.get("reason")
    prefetch_model(cfg)
    metrics = _evaluate(cfg, settings, out_dir)
    _report(cfg, settings, metrics, out_dir, cfg_fp, uri, artifact_location)
    error = metrics.get("error")
    if tracker is not None:
        try:
            run_id = log_to_mlflow(out_dir, tracker)
            if error:
                mark_failed(uri, run_id, error)
        except Exception as e:  # noqa: BLE001 - results are safe on disk; say how to import
            offline = f"logging to {uri} failed: {one_line(e)}"
    return _finish(metrics, out_dir, uri, offline)


class _Finished(Exception):  # noqa: N818 - a signal, not an error
    """The configuration turned out to be finished already (MLflow said so mid-run)."""


def _run_logging_in_background(cfg: DictConfig, settings: Settings, out_dir: Path,
                               cfg_fp: str, uri: str, artifact_location: Path) -> float | None:
    """A single run whose MLflow work (the "finished?" test, opening the store, logging) runs
    in a child process (:mod:`experiments.log_worker`) alongside the evaluation. A finished
    configuration is still skipped: the evaluation stops at the next method once the child
    says so, and with ``skip_finished`` nothing is written before the child has answered."""
    with BackgroundLogger(uri, cfg.mlflow.experiment, artifact_location, cfg_fp,
                          cfg.mlflow.skip_finished) as logger:
        prefetch_model(cfg)
        reported = False

        def finished(wait: bool = False) -> str | None:
            nonlocal reported
            status = logger.status(wait=wait)
            if status is None:
                return None
            done = _announce(status) if not reported else status.get("run_id")
            reported = True
            return done

        def stop(wait: bool) -> bool:
            if finished(wait=wait and cfg.mlflow.skip_finished):
                raise _Finished
            return reported  # the logging process has answered: the run goes on

        try:
            metrics = _evaluate(cfg, settings, out_dir, stop=stop, plot=False)
        except _Finished:
            metrics = None
        done = finished(wait=True)
        if done:
            _print_skipped(cfg, cfg_fp, done)
            return None
        assert metrics is not None
        status = logger.status()
        ready = status["state"] == "ready"
        # the logging process draws the plot (it has matplotlib loaded by then) before it
        # logs; if nothing is logged, this process draws it
        plot = bool(cfg.plots.reliability and metrics["methods"])
        if plot and not ready:
            plot_predictions_reliability(pd.read_csv(out_dir / "predictions.csv"),
                                         out_dir / RELIABILITY_PLOT, reliability_title(cfg))
        _report(cfg, settings, metrics, out_dir, cfg_fp, uri, artifact_location,
                pending=(RELIABILITY_PLOT,) if plot and ready else ())
        offline = None if ready else status.get("reason")
        if ready:
            answer = logger.log(out_dir, metrics.get("error"),
                                plot=reliability_title(cfg) if plot else None)
            if answer["state"] != "logged":
                offline = answer["reason"]
    return _finish(metrics, out_dir, uri, offline)


def _evaluate(cfg: DictConfig, settings: Settings, out_dir: Path,
              stop: Callable[[bool], bool] | None = None, plot: bool = True) -> dict[str, Any]:
    """:func:`evaluate_run`; a dataset error ends the run with its one-line message."""
    try:
        return evaluate_run(cfg, settings, out_dir, stop=stop, plot=plot)
    except DatasetError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


def _report(cfg: DictConfig, settings: Settings, metrics: dict[str, Any], out_dir: Path,
            cfg_fp: str, uri: str, artifact_location: Path, pending: tuple[str, ...] = ()
            ) -> None:
    """Print the regime and the table, and write ``mlflow_run.json``."""
    print(regime(cfg, settings))
    print_table(metrics)
    write_record(out_dir, run_record(cfg, metrics, out_dir, cfg_fp, uri, artifact_location,
                                     pending))


def _finish(metrics: dict[str, Any], out_dir: Path, uri: str,
            offline: str | None) -> float | None:
    """The run's last lines (the import hint if it was not logged, where the outputs are);
    exit 1 if a phase failed; else SmartVector's top-1 accuracy."""
    error = metrics.get("error")
    if offline:
        print(_import_hint(offline, uri), file=sys.stderr)
    print(f"outputs: {out_dir}")
    if error:
        print(f"error: {error['phase']} failed: {error['message']} (the phases that finished "
              f"are in {out_dir})", file=sys.stderr)
        sys.exit(1)
    top = metrics["methods"].get("smartvector", next(iter(metrics["methods"].values())))
    return float(top["quality"]["top1_accuracy"])


def _announce(status: dict[str, Any]) -> str | None:
    """Say what opening the store found (:func:`tracking.open_for_run`): runs reaped, a store
    that cannot be used; returns the finished run's id, if the configuration has one."""
    reaped = status.get("reaped")
    if reaped:
        print(f"note: marked {len(reaped)} MLflow run(s) KILLED whose process on this host is "
              f"gone: {', '.join(reaped)}", file=sys.stderr)
    if status["state"] == "offline":
        print(f"warning: {status['reason']}; running anyway, results are kept locally",
              file=sys.stderr)
    return status.get("run_id") if status["state"] == "finished" else None


def _print_skipped(cfg: DictConfig, cfg_fp: str, run_id: str) -> None:
    print(f"skipped: {cfg.study}-seed{cfg.seed}-{cfg_fp[:6]} (configuration {cfg_fp}) "
          f"already finished as MLflow run {run_id} (force with mlflow.skip_finished=false)")


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    # Under ``python -m experiments.run`` this function is ``__main__``'s, so a sweep's joblib
    # (loky) workers get it pickled by value, with module globals of their own for every job:
    # the shared embedder, and its model, were made again for each job (~0.3 CPU-s a load).
    # The work runs in the importable module instead, whose state a worker's jobs share (as
    # the jobs of a sweep in one process do).
    from experiments import run

    return run.run_task(cfg)


def run_task(cfg: DictConfig) -> float | None:
    """One run of ``cfg`` (what ``main`` does under Hydra): validate, run, report."""
    quick_worker_exit()  # a sweep's joblib worker ends without tearing its modules down
    fewer_full_collections()  # ... and runs no full garbage collection after every job
    hold_signals_in_numba_loads()  # a Ctrl-C during a kernel's first load is not lost
    try:
        settings = validate(cfg)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    with sigterm_as_interrupt():
        try:
            release_startup()  # an interrupt held since the first line is raised here
            return _run(cfg, settings)
        except (KeyboardInterrupt, RuntimeError) as caught:
            e = interrupt_of(caught)
            if e is None:
                raise
            how, code = ("SIGTERM", 143) if isinstance(e, Terminated) else ("Ctrl-C", 130)
            print(f"interrupted ({how}): no MLflow run is left RUNNING; run the same command "
                  "again to resume (finished configurations are skipped)", file=sys.stderr)
            if HydraConfig.get().mode == RunMode.RUN:
                # not SystemExit: CPython then exits by SIGINT (status -2, not 130) when the
                # interrupt passed through code exec'd from a string (scipy's and numpy's
                # imports do that), even though it was caught here
                exit_now(code)
            sys.exit(code)


if __name__ == "__main__":
    main()
    exit_now(0)
