"""The harness's front door: ``python -m experiments.run [overrides]`` (sweeps: ``-m``).

One configuration, as a linear pipeline: validate every value, read the dataset, claim the
configuration's results directory (skip it if finished), replay and grade every method, write
the results, print the table, log the directory to MLflow.
"""

from __future__ import annotations

import atexit
import gc
import sys
from pathlib import Path

import hydra
import pandas as pd
from omegaconf import DictConfig, OmegaConf

from experiments.config import register
from experiments.data.dataset import DatasetError
from experiments.data.loading import materialise, read_in_place, source_of, split_queries
from experiments.ops.resilience import Terminated, interrupt_of, one_line, sigterm_as_interrupt
from experiments.protocol.job import evaluate
from experiments.results.mlflow_export import (
    CHART_RUNS,
    artifact_location_for,
    finished_on_server,
    is_server_uri,
    log_results,
    open_experiment,
    resolve_tracking_uri,
)
from experiments.results.provenance import fingerprint
from experiments.results.record import RunResults, claim, is_finished, results_dir
from experiments.settings import ConfigError, Settings, validate

register()
# At exit, move every object out of the collector's reach: the interpreter's last full
# collection would otherwise walk the ~480,000 objects of MLflow, qdrant-client and pandas
# (~1.3 s of a 7 s run) only to free memory the ending process returns anyway.
atexit.register(gc.freeze)

#: Keys that change no result (left out of the configuration fingerprint).
NOT_RESULTS = ("mlflow", "plots", "results_root")


def config_fingerprint(cfg: DictConfig, data_fp: str | None) -> str:
    """Every resolved key that can change a result and, for a dataset read in place, its
    content fingerprint (the same config on edited data is another configuration)."""
    container = OmegaConf.to_container(cfg, resolve=True)
    keys = {k: v for k, v in container.items() if k not in NOT_RESULTS}
    if data_fp is not None:
        keys["dataset_content"] = data_fp
    return fingerprint(keys)


def regime(cfg: DictConfig, settings: Settings) -> str:
    """One line naming the choices that move results: the dataset's scalar settings, the
    protocol's mode and each method's pool."""
    parts = [f"dataset={cfg.dataset.kind}"]
    parts += [f"{k}={v}" for k, v in OmegaConf.to_container(cfg.dataset, resolve=True).items()
              if k not in ("kind", "seed", "path") and isinstance(v, int | float | str)]
    parts.append(f"mode={cfg.protocol.mode} index={cfg.protocol.index}")
    pools = {n: p["pool"] for n, p in settings.methods.items() if p.get("pool") is not None}
    if pools:
        distinct = sorted(set(pools.values()))
        parts.append("pool=" + (str(distinct[0]) if len(distinct) == 1 else
                                ",".join(f"{n}:{v}" for n, v in pools.items())))
    return "regime: " + " ".join(parts)


def fail(message: str, code: int = 2) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def run_pipeline(cfg: DictConfig, base: Path) -> float | None:
    """One configuration from start to end; returns SmartVector's top-1 accuracy."""
    try:  # 1. validate, read the dataset (a dataset read in place: now, once)
        settings = validate(cfg, base)
        ds = read_in_place(settings, base)
    except (ConfigError, DatasetError) as e:
        fail(str(e))
    fp = config_fingerprint(cfg, None if ds is None else ds.fingerprint())
    out = results_dir(base / cfg.results_root, cfg.study, fp)
    uri = resolve_tracking_uri(cfg.mlflow.tracking_uri, base)
    name = f"{cfg.study}-seed{cfg.seed}-{fp[:6]}"
    with claim(out):  # 2. the configuration's directory, held until its results are written
        if cfg.mlflow.skip_finished and (is_finished(out) or (
                cfg.mlflow.enabled and is_server_uri(uri)
                and finished_on_server(uri, cfg.mlflow.experiment, fp, list(settings.methods)))):
            print(f"skipped: {name} (configuration {fp}) already finished in {out} "
                  "(force with mlflow.skip_finished=false)")
            return None
        try:  # 3. generate the dataset, replay, grade, write
            if ds is None:
                ds = materialise(settings, out, base)
            ds = split_queries(ds, cfg.query_split)
        except DatasetError as e:
            fail(str(e))
        results = evaluate(cfg, settings, ds, out, base, fp, source_of(cfg, settings, base))
    print(regime(cfg, settings))
    print_table(results)
    if cfg.mlflow.enabled:  # 4. log the directory (the same code as import_runs)
        log(out, uri, cfg, base)
    print(f"outputs: {out}")
    if results.error:
        fail(f"{results.error['phase']} failed: {results.error['message']} (the phases that "
             f"finished are in {out})", code=1)
    top = results.methods.get("smartvector") or next(iter(results.methods.values()))
    return float(top.quality["top1_accuracy"])


def log(out: Path, uri: str, cfg: DictConfig, base: Path) -> None:
    """Log a results directory; if the store cannot take it, say how to log it later."""
    location = artifact_location_for(uri, cfg.mlflow.artifact_location, base)
    experiment, reason = open_experiment(uri, cfg.mlflow.experiment, location)
    if experiment is not None:
        if experiment.reaped:
            print(f"note: marked {len(experiment.reaped)} MLflow run(s) KILLED whose process "
                  f"on this host is gone: {', '.join(experiment.reaped)}", file=sys.stderr)
        try:
            log_results(out, experiment, detail=cfg.mlflow.detail)
            if len(cfg.methods) > CHART_RUNS:
                print(f"note: MLflow's chart view draws the first {CHART_RUNS} runs of "
                      f"{len(cfg.methods)}: pick 'Show all runs' (the eye above the run list) "
                      "to compare every method", file=sys.stderr)
            return
        except Exception as e:  # noqa: BLE001 - results are safe on disk
            reason = f"logging to {uri} failed: {one_line(e)}"
    print(f"warning: not logged to MLflow ({reason}); the results are in {out}; when the "
          f"store is back run: python -m experiments.results.import_runs {out} (add --tracking-uri "
          f"URI to log elsewhere than {uri})", file=sys.stderr)


def print_table(results: RunResults) -> None:
    c = results.corpus
    print(f"corpus: {c.vectors} vectors, {c.documents} documents, {c.queries} queries")
    if c.unanswerable or c.label_problems:
        print(f"left out: {c.unanswerable} unanswerable queries, {c.label_problems} whose labels "
              "cannot be right (each with its reason in left_out.csv)")
    rows = [{"method": name,
             **{k: f"{m.quality[k]:.3f} [{m.quality[k + '_ci_lo']:.2f},"
                   f"{m.quality[k + '_ci_hi']:.2f}]" for k in ("top1_accuracy", "stale_rate")},
             "contradicted": f"{m.quality['contradicted_rate']:.3f}",
             "ece": f"{m.quality['ece']:.3f}", "p50_ms": f"{m.timing['latency_p50_ms']:.2f}"}
            for name, m in results.methods.items()]
    if rows:
        print(pd.DataFrame(rows).to_string(index=False))
    r = results.reembed
    if r:
        print("chunks re-embedded per one-word edit: "
              f"full {r['reembed_full_reindex']:.2f}, hash-dedup (fixed windows) "
              f"{r['reembed_hash_dedup_window']:.2f}, surgical {r['reembed_surgical']:.2f}")


def run_task(cfg: DictConfig) -> float | None:
    """:func:`run_pipeline` with interrupts (Ctrl-C, SIGTERM) ending the run cleanly."""
    with sigterm_as_interrupt():
        try:
            return run_pipeline(cfg, Path(hydra.utils.get_original_cwd()))
        except (KeyboardInterrupt, RuntimeError) as caught:
            e = interrupt_of(caught)
            if e is None:
                raise
            how, code = ("SIGTERM", 143) if isinstance(e, Terminated) else ("Ctrl-C", 130)
            print(f"interrupted ({how}): run the same command again to resume (finished "
                  "configurations are skipped)", file=sys.stderr)
            sys.exit(code)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    return run_task(cfg)


if __name__ == "__main__":
    main()
