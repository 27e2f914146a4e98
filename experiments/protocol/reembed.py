"""Re-embedding cost of one-word edits: full re-indexing, hash-deduplicated re-indexing
(LangChain's indexing API: only chunks whose content hash is new are embedded) and
SmartVector's surgical update.

An edit replaces one word (>= 3 letters) of a document's latest version with another word
of that document of a different length, chosen with a seeded RNG; a length change is what
shifts fixed-size windows, and most real edits change length.
"""

from __future__ import annotations

import itertools
import random
import re

import numpy as np

from experiments.data.dataset import Dataset
from smartvector import HashingEmbedder, SmartVectorStore
from smartvector.chunking import chunk_text, fixed_window_chunks

_WORD = re.compile(r"[A-Za-z]{3,}")


def one_word_edit(text: str, rng: random.Random) -> str | None:
    """``text`` with one word replaced by a word of different length, or None."""
    words = _WORD.findall(text)
    if len(words) < 2:
        return None
    # rng.choice of the i-th word, as of the list of words (it uses only the length)
    i = rng.choice(range(len(words)))
    size = len(words[i])
    others = sorted(w for w in set(words) if len(w) != size)
    if not others:
        return None
    target = next(itertools.islice(_WORD.finditer(text), i, None))
    return text[: target.start()] + rng.choice(others) + text[target.end():]


def _new_hashes(old: list, new: list) -> int:
    seen = {c.hash for c in old}
    return sum(c.hash not in seen for c in new)


def edit_costs(dataset: Dataset, n_edits: int = 200, seed: int = 0,
               window: int = 500, overlap: int = 50) -> dict[str, float]:
    """Mean chunks (re-)embedded per one-word edit of the latest version of documents that
    the corpus edits (more than one version), or of any document if it edits none."""
    latest: dict[str, str] = {}
    versions: dict[str, int] = {}
    for d in dataset.corpus:
        latest[d.doc_id] = d.text
        versions[d.doc_id] = versions.get(d.doc_id, 0) + 1
    edited = sorted(k for k, n in versions.items() if n > 1) or sorted(latest)
    return text_edit_costs([latest[k] for k in edited], n_edits, seed, window, overlap)


#: the ways of re-indexing an edited document whose costs are measured, in the tables' order
COSTS = ("full_reindex", "hash_dedup_paragraph", "full_reindex_window", "hash_dedup_window",
         "surgical")


def text_edit_costs(texts: list[str], n_edits: int = 200, seed: int = 0,
                    window: int = 500, overlap: int = 50) -> dict[str, float]:
    """Mean chunks (re-)embedded per one-word edit of documents drawn from ``texts``."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n_edits if texts else 0):
        i = rng.randrange(len(texts))
        old = texts[i]
        new = one_word_edit(old, rng)
        if new is None:
            continue
        po, pn = chunk_text(old), chunk_text(new)
        wo = fixed_window_chunks(old, window, overlap)
        wn = fixed_window_chunks(new, window, overlap)
        store = SmartVectorStore(HashingEmbedder(dim=64), "exact")
        store.add_document("doc", old, 0.0)
        surgical = store.add_document("doc", new, 1.0).n_reembedded
        rows.append((len(pn), _new_hashes(po, pn), len(wn), _new_hashes(wo, wn), surgical))
    a = np.array(rows, dtype=np.float64).reshape(-1, 5)
    out = {f"reembed_{n}": float(a[:, i].mean()) if len(a) else float("nan")
           for i, n in enumerate(COSTS)}
    out["reembed_edits"] = float(len(a))
    return out
