"""Study 5: chunks re-embedded per one-word edit as documents grow, for full re-indexing,
hash-deduplicated re-indexing (fixed windows and paragraphs) and surgical updates.

``python -m experiments.reembed_study -m n_paragraphs=5,10,20,50,100,200,500 seed=0,1,2,3,4``

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
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from smartvector.chunking import chunk_text

from .config import MlflowConfig
from .corpora.policy_synth import PolicySynthConfig, generate
from .reembed import text_edit_costs
from .resilience import fewer_full_collections, quick_worker_exit
from .tracking import fingerprint, flatten, git_commit, open_for_run, resolve_tracking_uri


@dataclass
class ReembedStudyConfig:
    study: str = "paper_reembed_length"
    seed: int = 0
    n_paragraphs: int = 5
    n_docs: int = 20
    n_edits: int = 100
    window: int = 500
    overlap: int = 50
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)


ConfigStore.instance().store(name="reembed_study_schema", node=ReembedStudyConfig)


def documents(n_paragraphs: int, n_docs: int, seed: int) -> list[str]:
    """``n_docs`` documents of ``n_paragraphs`` paragraphs from the policy corpus's pool."""
    corpus, _ = generate(PolicySynthConfig(seed=seed))
    pool = sorted({c.text for d in corpus for c in chunk_text(d["text"])})
    rng = random.Random(f"reembed:{seed}:{n_paragraphs}")
    return ["\n\n".join(rng.choice(pool) for _ in range(n_paragraphs)) for _ in range(n_docs)]


@hydra.main(version_base="1.3", config_path="../conf", config_name="reembed_study")
def main(cfg: DictConfig) -> None:
    quick_worker_exit()  # a sweep's joblib worker ends without tearing its modules down
    fewer_full_collections()  # ... and runs no full garbage collection after every job
    if cfg.n_paragraphs < 1 or cfg.n_docs < 1 or cfg.n_edits < 1:
        raise SystemExit("error: n_paragraphs, n_docs and n_edits must be >= 1")
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    container = OmegaConf.to_container(cfg, resolve=True)
    fp = fingerprint({k: v for k, v in container.items() if k != "mlflow"})
    tracker = None
    if cfg.mlflow.enabled:  # a configuration already in the store is skipped, as runs are
        base = Path(hydra.utils.get_original_cwd())
        status, tracker = open_for_run(
            resolve_tracking_uri(cfg.mlflow.tracking_uri, base), cfg.mlflow.experiment,
            (base / cfg.mlflow.artifact_location).resolve(), fp, cfg.mlflow.skip_finished)
        if status["state"] == "finished":
            print(f"skipped: reembed-{cfg.n_paragraphs}p-seed{cfg.seed} (configuration {fp}) "
                  f"already finished as MLflow run {status['run_id']} "
                  "(force with mlflow.skip_finished=false)")
            return
        if tracker is None:
            print(f"warning: {status['reason']}; running anyway, the metrics are kept in "
                  f"{out_dir / 'metrics.json'} only", file=sys.stderr)
    docs = documents(cfg.n_paragraphs, cfg.n_docs, cfg.seed)
    metrics = text_edit_costs(docs, cfg.n_edits, cfg.seed, cfg.window, cfg.overlap)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    print(f"{cfg.n_paragraphs} paragraphs: " + ", ".join(
        f"{k.removeprefix('reembed_')} {v:.2f}" for k, v in metrics.items()))
    if tracker is not None:
        with tracker.run(f"reembed-{cfg.n_paragraphs}p-seed{cfg.seed}",
                         {"config_fingerprint": fp, "git_commit": git_commit(base),
                          "study": cfg.study}):
            tracker.log_params(flatten(container))
            tracker.log_metrics(metrics)


if __name__ == "__main__":
    main()
