"""Study 5: chunks re-embedded per one-word edit as documents grow, for full re-indexing,
hash-deduplicated re-indexing (fixed windows and paragraphs) and surgical updates.

``python -m experiments.studies.reembed_study -m n_paragraphs=5,10,20,50,100,200,500
seed=0,1,2,3,4``

Documents of ``n_paragraphs`` paragraphs are drawn (seeded) from the paragraphs of the
synthetic policy corpus, so paragraph lengths are the corpus's own.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from experiments.config import MlflowConfig
from experiments.data.policy_synth import PolicySynthConfig, generate
from experiments.protocol.reembed import text_edit_costs
from experiments.results.provenance import fingerprint, flatten, git_commit
from experiments.results.record import CONFIG_FILE, claim, results_dir
from smartvector.chunking import chunk_text
from smartvector.fileio import atomic_write_text

#: the study's results file in its results directory
REEMBED_FILE = "reembed.json"


@dataclass
class ReembedStudyConfig:
    study: str = "paper_reembed_length"
    seed: int = 0
    n_paragraphs: int = 5
    n_docs: int = 20
    n_edits: int = 100
    window: int = 500
    overlap: int = 50
    results_root: str = "outputs"
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)


ConfigStore.instance().store(name="reembed_study_schema", node=ReembedStudyConfig)


def documents(n_paragraphs: int, n_docs: int, seed: int) -> list[str]:
    """``n_docs`` documents of ``n_paragraphs`` paragraphs from the policy corpus's pool."""
    corpus, _ = generate(PolicySynthConfig(seed=seed))
    pool = sorted({c.text for d in corpus for c in chunk_text(d["text"])})
    rng = random.Random(f"reembed:{seed}:{n_paragraphs}")
    return ["\n\n".join(rng.choice(pool) for _ in range(n_paragraphs)) for _ in range(n_docs)]


def config_fingerprint_of(cfg: DictConfig) -> str:
    """The configuration's fingerprint (the keys that change no result left out)."""
    container = OmegaConf.to_container(cfg, resolve=True)
    return fingerprint({k: v for k, v in container.items() if k not in ("mlflow",
                                                                        "results_root")})


def run_reembed(cfg: DictConfig, base: Path) -> None:
    """One configuration: the costs written to its results directory, then logged."""
    if cfg.n_paragraphs < 1 or cfg.n_docs < 1 or cfg.n_edits < 1:
        raise SystemExit("error: n_paragraphs, n_docs and n_edits must be >= 1")
    fp = config_fingerprint_of(cfg)
    out = results_dir(base / cfg.results_root, cfg.study, fp)
    name = f"reembed-{cfg.n_paragraphs}p-seed{cfg.seed}"
    with claim(out):
        if cfg.mlflow.skip_finished and (out / REEMBED_FILE).is_file():
            print(f"skipped: {name} (configuration {fp}) already finished in {out} "
                  "(force with mlflow.skip_finished=false)")
            return
        docs = documents(cfg.n_paragraphs, cfg.n_docs, cfg.seed)
        metrics = text_edit_costs(docs, cfg.n_edits, cfg.seed, cfg.window, cfg.overlap)
        (out / CONFIG_FILE).write_text(OmegaConf.to_yaml(cfg, resolve=True))
        atomic_write_text(out / REEMBED_FILE, json.dumps(metrics, indent=2, sort_keys=True)
                          + "\n")
    print(f"{cfg.n_paragraphs} paragraphs: " + ", ".join(
        f"{k.removeprefix('reembed_')} {v:.2f}" for k, v in metrics.items()))
    if cfg.mlflow.enabled:
        log_costs(cfg, base, name, fp, out, metrics)


def log_costs(cfg: DictConfig, base: Path, name: str, fp: str, out: Path,
              metrics: dict[str, float]) -> None:
    """One MLflow run of the costs, in an experiment opened as the runs' are (its artifacts
    beside a SQLite store, never in a stray ``./mlruns``)."""
    from mlflow.entities import Metric, Param

    from experiments.results.mlflow_export import (
        artifact_location_for,
        open_experiment,
        process_tags,
        resolve_tracking_uri,
    )

    uri = resolve_tracking_uri(cfg.mlflow.tracking_uri, base)
    experiment, reason = open_experiment(uri, cfg.mlflow.experiment, artifact_location_for(
        uri, cfg.mlflow.artifact_location, base))
    if experiment is None:
        print(f"warning: not logged to MLflow ({reason}); the results are in {out}",
              file=sys.stderr)
        return
    client = experiment.client
    params = flatten(OmegaConf.to_container(cfg, resolve=True))
    try:
        run = client.create_run(experiment.id, run_name=name, tags={
            "config_fingerprint": fp, "study": cfg.study, "results_dir": str(out),
            "provenance": json.dumps({"git_commit": git_commit(base)}), **process_tags()})
        client.log_batch(run.info.run_id, params=[Param(k, str(v)) for k, v in params.items()],
                         metrics=[Metric(k, float(v), 0, 0) for k, v in metrics.items()])
        client.set_terminated(run.info.run_id, "FINISHED")
    except Exception as e:  # noqa: BLE001 - the results are on disk (a run left RUNNING is
        # reaped by the next process that opens the experiment)
        print(f"warning: not logged to MLflow ({e}); the results are in {out}",
              file=sys.stderr)


@hydra.main(version_base="1.3", config_path="../../conf", config_name="reembed_study")
def main(cfg: DictConfig) -> None:
    run_reembed(cfg, Path(hydra.utils.get_original_cwd()))


if __name__ == "__main__":
    main()
