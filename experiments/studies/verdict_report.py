"""The pre-registered verdict's tables (``results/preregistration.md``) from the verdict
studies' results directories: for each own design (v2, v3), every cell (27 synthetic regimes
of the held-out facts at seeds 20-39, and the three real corpora's test splits with
``chunk_context=none``) against the best other method, classified by
:mod:`experiments.studies.verdict`; the counts; and the registered secondary metrics, with
ECE calibrated against calibrated (each method's isotonic map fitted on its own
development predictions from the ``verdict_dev_*`` studies)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from experiments.studies.figures import REAL_CORPORA as REAL
from experiments.studies.figures import REGIME_KEYS, calibrated_ece, write_table
from experiments.studies.verdict import OTHER_METHODS, counts, verdict_table

OWN = ("smartvector_v2", "smartvector_v3")


def _runs(store, study: str) -> pd.DataFrame:
    """Every finished run's predictions, with its regime / corpus and context columns."""
    frames = []
    for run in store.parents(study):
        df = store.predictions(run)  # with the swept params (seed, regime) as columns
        df["corpus"] = run.data.params.get("dataset.kind", "")
        df["context"] = run.data.params.get("protocol.chunk_context", "none")
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def regime_name(timing: str, rate: str, sup: str, windows: str) -> str:
    nowin = "" if str(windows) == "True" or sup == "versions" else " (no windows)"
    return f"{timing} / rumors {float(rate):g} / {sup}{nowin}"


def cells(test_synth: pd.DataFrame, test_real: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The registered cells, in order: 27 regimes, then the real corpora (context none)."""
    out: dict[str, pd.DataFrame] = {}
    if not test_synth.empty:
        for key, part in test_synth.groupby(REGIME_KEYS, sort=True):
            out[regime_name(*key)] = part
    if not test_real.empty:
        none = test_real[test_real.context == "none"]
        for name in REAL:
            part = none[none.corpus == name]
            if not part.empty:
                out[name] = part
    return out


def secondary(cell: pd.DataFrame, dev: pd.DataFrame, methods: list[str]) -> list[dict]:
    """The registered secondary metrics of ``methods`` on one cell."""
    rows = []
    for m in methods:
        t = cell[cell.method == m]
        if t.empty:
            continue
        on_doc = t[t["doc_recall_at_1"] == 1]
        rows.append({
            "method": m, "top1": t.grade.eq("correct").mean(),
            "ndcg_at_10": t["ndcg_at_10"].mean(), "doc_recall_at_1": t["doc_recall_at_1"].mean(),
            "version_acc_given_doc_at_1": (on_doc.grade.eq("correct").mean() if len(on_doc)
                                           else np.nan),
            "stale_rate": t.grade.eq("stale").mean(),
            "ece_calibrated": calibrated_ece(dev[dev.method == m], t)})
    return rows


def build(store, out: Path) -> dict[str, str]:
    """Write ``verdict_<design>.{csv,md}``, ``verdict_counts`` and ``verdict_secondary``;
    returns the report's tables by name."""
    test = cells(_runs(store, "verdict_synth"), _runs(store, "verdict_real"))
    if not test:
        return {}
    dev_synth, dev_real = _runs(store, "verdict_dev_synth"), _runs(store, "verdict_dev_real")
    made, summary, extra = {}, [], []
    for own in OWN:
        if not all(own in set(c.method) for c in test.values()):
            continue
        table = verdict_table(test, own)
        show = table.assign(**{c: 100 * table[c] for c in ("own", "other", "difference",
                                                            "lo", "hi")})
        made[f"verdict_{own}"] = write_table(show.round(1), out, f"verdict_{own}")
        n = counts(table)
        summary.append({"design": own, "cells": len(table), **n,
                        "target met (>= -1 pt)": int(table["target met"].sum()),
                        "real corpora won": int(sum(table.loc[table.cell.isin(REAL),
                                                              "verdict"] == "win"))})
    for name, cell in test.items():
        dev = dev_real[(dev_real.corpus == name) & (dev_real.context == "none")] if (
            name in REAL) else dev_synth
        present = [m for m in (*OWN, *OTHER_METHODS) if m in set(cell.method)]
        for row in secondary(cell, dev, present):
            extra.append({"cell": name, **row})
    made["verdict_counts"] = write_table(pd.DataFrame(summary), out, "verdict_counts")
    sec = pd.DataFrame(extra)
    sec.to_csv(out / "verdict_secondary.csv", index=False, float_format="%.4f")
    pooled = sec.assign(synthetic=~sec.cell.isin(REAL)).groupby(
        ["synthetic", "method"], sort=False).mean(numeric_only=True).reset_index()
    pooled["data"] = np.where(pooled.synthetic, "27 regimes (mean)", "")
    real = sec[sec.cell.isin(REAL)].assign(data=lambda d: d.cell)
    show = pd.concat([pooled[pooled.synthetic].drop(columns="synthetic"),
                      real.drop(columns="cell")], ignore_index=True)
    show = show[["data", *[c for c in show.columns if c != "data"]]]
    made["verdict_secondary"] = write_table(show.round(3), out, "verdict_secondary")
    return made
