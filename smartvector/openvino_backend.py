"""OpenVINO backend for sentence-transformers models of the form Transformer + mean pooling.

The model's transformer and its mean pooling are converted once from the local weights
(torch + transformers, no hub) to an OpenVINO IR in ``<export_root>/<identity>/``, written
to a temporary directory and renamed into place, so concurrent processes never see half a
model. Later runs load the IR without importing torch. Tokenization uses the model's own
``tokenizer.json`` (the ``tokenizers`` library); each text is padded to a width fixed by its
own token count and batched only with texts of that width, so a text's vector does not
depend on the texts embedded with it (see :func:`length_batches`); batches run on parallel
single-threaded streams. Rows come back L2-normalised.

``precision`` ``"f32"`` matches torch to ~1e-7 in cosine; ``"bf16"`` is 2-3x faster again
where the CPU has native bf16 (Intel AMX) but moves cosines by up to ~3e-3, enough to swap
near-tied neighbours; ``"auto"`` is bf16 where that is OpenVINO's own default and f32
elsewhere. The resolved precision is part of the embedder's name, so vectors of different
precisions never share a cache identity.

openvino, tokenizers, torch and transformers are imported only when needed.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: bump when the exported graph changes (it is part of the export directory's name)
EXPORT_FORMAT = "ov1-meanpool"
_IDENTITY_CHUNK = 1 << 20


def model_identity(model_dir: str | os.PathLike[str]) -> str:
    """SHA-256 over every file of a model directory (relative path, size and bytes).

    Robust (a changed weight or config file changes it; reinstalling the same files does
    not) and cheap enough: ~0.15 s for all-MiniLM-L6-v2's 90 MB. Hidden files and folders
    (``.git``, ``.cache``) and README files are skipped.
    """
    root = Path(model_dir)
    h = hashlib.sha256()
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
        and not p.name.lower().startswith("readme")
    )
    for p in files:
        rel = p.relative_to(root).as_posix().encode("utf-8")
        h.update(len(rel).to_bytes(8, "little") + rel + p.stat().st_size.to_bytes(8, "little"))
        with open(p, "rb") as f:
            for block in iter(lambda f=f: f.read(_IDENTITY_CHUNK), b""):
                h.update(block)
    return h.hexdigest()


def default_threads() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def resolve_precision(precision: str) -> str:
    """``"bf16"`` or ``"f32"``: ``"auto"`` is bf16 where OpenVINO's CPU plugin defaults to it."""
    if precision not in ("auto", "bf16", "f32"):
        raise ValueError(f"precision must be auto, bf16 or f32, got {precision!r}")
    if precision != "auto":
        return precision
    import openvino as ov

    default = str(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT"))
    return "bf16" if "bf" in default.lower() else "f32"


class _Config:
    """What the export and the tokenizer need from a sentence-transformers model directory."""

    def __init__(self, model_dir: Path) -> None:
        self.dir = model_dir
        modules_file = model_dir / "modules.json"
        modules = json.loads(modules_file.read_text()) if modules_file.is_file() else None
        self.max_len = 512
        self.lower = False
        st_config = model_dir / "sentence_bert_config.json"
        if st_config.is_file():
            cfg = json.loads(st_config.read_text())
            self.max_len = int(cfg.get("max_seq_length") or self.max_len)
            self.lower = bool(cfg.get("do_lower_case", False))
        if modules is not None:
            kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
            if kinds[:2] != ["Transformer", "Pooling"] or any(
                k != "Normalize" for k in kinds[2:]
            ):
                raise ValueError(
                    f"the openvino backend supports Transformer + Pooling (+ Normalize) models; "
                    f"{model_dir} has {' + '.join(kinds)}"
                )
            pooling = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
            modes = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v is True]
            if modes != ["pooling_mode_mean_tokens"]:
                raise ValueError(
                    f"the openvino backend supports mean pooling only; {model_dir} uses "
                    f"{', '.join(modes) or 'no pooling mode'}"
                )
        cfg = json.loads((model_dir / "config.json").read_text())
        self.hidden = int(cfg.get("hidden_size") or cfg.get("d_model") or cfg["dim"])
        self.max_len = min(self.max_len, int(cfg.get("max_position_embeddings") or self.max_len))
        if not (model_dir / "tokenizer.json").is_file():
            raise ValueError(f"the openvino backend needs {model_dir / 'tokenizer.json'}")


def check_supported(model_dir: Path) -> None:
    """ValueError (one line) unless the openvino backend can run the model at ``model_dir``."""
    _Config(model_dir)


def export(model_dir: Path, dest: Path) -> None:
    """Convert the transformer + mean pooling at ``model_dir`` to ``dest/model.xml`` (f32)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(f"converting {model_dir} to OpenVINO (once; cached in {dest.parent})", file=sys.stderr)
    with warnings.catch_warnings():  # tracer and deprecation chatter, about code we do not own
        warnings.simplefilter("ignore")
        _export(model_dir, dest)


def _export(model_dir: Path, dest: Path) -> None:
    import openvino as ov
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    class MeanPooled(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.inner(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)

    ids = torch.full((2, 8), 100, dtype=torch.long)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0  # trace with padding, so no "all ones" shortcut is baked in
    verbosity, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        model = AutoModel.from_pretrained(
            str(model_dir), local_files_only=True, attn_implementation="sdpa"
        ).eval()
        example = {"input_ids": ids, "attention_mask": mask}
        with torch.no_grad():
            ov_model = ov.convert_model(
                _traced(MeanPooled(model), example),
                example_input=example,
                input=[
                    ("input_ids", [-1, -1], ov.Type.i64),
                    ("attention_mask", [-1, -1], ov.Type.i64),
                ],
            )
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            hf_logging.enable_progress_bar()
    ov.save_model(ov_model, dest / "model.xml", compress_to_fp16=False)


def _traced(module: Any, example: dict[str, Any]) -> Any:
    """What ``ov.convert_model`` traces itself, minus ``torch.jit.trace``'s self-check.

    The check (on by default) runs the model twice more and re-traces it to compare graphs:
    about half the conversion's time, and it changes nothing in the traced graph (the IR is
    byte-identical with and without it). Falls back to the module itself (convert_model then
    traces it, checked) if this OpenVINO has no such decoder.
    """
    try:
        from openvino.frontend.pytorch.ts_decoder import TorchScriptPythonDecoder
    except ImportError:
        return module
    return TorchScriptPythonDecoder(
        module, example_input=dict(example), trace_kwargs={"check_trace": False}
    )


def export_dir(identity: str, export_root: Path) -> Path:
    """Where the IR of the model with ``identity`` lives under ``export_root``."""
    return Path(export_root) / f"{identity[:24]}-{EXPORT_FORMAT}"


#: conversions running in a child process (:func:`start_export`), by IR directory
_BACKGROUND: dict[Path, subprocess.Popen] = {}


def start_export(model_dir: Path, identity: str, export_root: Path) -> bool:
    """Start the one-time conversion in a child process, so that it runs on another core
    while the caller does other work (and the caller never imports torch); True if started.

    Nothing happens when the IR exists, a conversion is already running, or a package the
    conversion needs is missing (the in-process path then reports it). :func:`ensure_export`
    waits for the child and, if it failed, converts in-process, so errors surface as before.
    A child still running when this process exits is stopped (it leaves no partial IR).
    """
    final = export_dir(identity, export_root)
    if (final / "model.xml").is_file() or final in _BACKGROUND:
        return False
    import importlib.util

    for package in ("openvino", "torch", "transformers"):
        try:
            if importlib.util.find_spec(package) is None:
                return False
        except (ImportError, ValueError):
            return False
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[1])  # the smartvector package's parent
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "smartvector.openvino_backend", str(model_dir), identity,
         str(export_root)],
        stdin=subprocess.DEVNULL, env=env,
    )
    _BACKGROUND[final] = proc
    if len(_BACKGROUND) == 1:
        atexit.register(_stop_background)
    return True


def _wait_background(final: Path) -> None:
    proc = _BACKGROUND.pop(final, None)
    if proc is not None:
        proc.wait()


def _stop_background() -> None:
    while _BACKGROUND:
        _, proc = _BACKGROUND.popitem()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def ensure_export(
    model_dir: Path, identity: str, export_root: Path, exporter: Callable[[Path, Path], None]
) -> Path:
    """The IR directory for ``identity``, exporting it first if missing (atomically)."""
    final = export_dir(identity, export_root)
    _wait_background(final)
    if (final / "model.xml").is_file():
        return final
    if final.exists():  # an unusable leftover (not written by this code, which renames)
        shutil.rmtree(final)
    export_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=export_root))
    try:
        tmp.chmod(0o755)
        exporter(model_dir, tmp)
        from importlib.metadata import version

        meta = {"source": str(model_dir), "identity": identity, "format": EXPORT_FORMAT}
        for pkg in ("openvino", "torch", "transformers"):
            meta[pkg] = version(pkg)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        try:
            os.rename(tmp, final)
        except OSError:  # another process finished first (final exists and is not empty)
            if not (final / "model.xml").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


class Runner:
    """A compiled OpenVINO model plus its tokenizer: texts -> unit rows.

    Compiled for throughput: OpenVINO splits the ``threads`` cores into streams (two
    single-threaded ones on 2 cores), each inferring its own batch, which beats one batch
    split over all cores for a model this small (~2.6x torch instead of ~2.1x, measured). A
    row's result depends on neither the stream that runs it nor the other rows of its batch
    (its padding depends on its own length only): a text embedded alone or among others gets
    the same bits. Thread-safe (one call at a time).
    """

    def __init__(self, model_dir: Path, ir_dir: Path, precision: str, threads: int) -> None:
        import openvino as ov
        from tokenizers import Tokenizer

        self.config = _Config(model_dir)
        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        padding = tok.padding or {}
        self.pad_id = int(padding.get("pad_id", tok.token_to_id("[PAD]") or 0))
        tok.no_padding()
        tok.enable_truncation(self.config.max_len)
        self.tokenizer = tok
        self.compiled = ov.Core().compile_model(
            str(ir_dir / "model.xml"),
            "CPU",
            {
                "INFERENCE_PRECISION_HINT": precision,
                "INFERENCE_NUM_THREADS": threads,
                "PERFORMANCE_HINT": "THROUGHPUT",
            },
        )
        jobs = int(self.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        self.queue = ov.AsyncInferQueue(self.compiled, max(1, jobs))
        self._lock = threading.Lock()

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        if self.config.lower:
            texts = [t.lower() for t in texts]
        return [e.ids for e in self.tokenizer.encode_batch(list(texts))]

    def _inputs(self, rows: Sequence[list[int]]) -> dict[str, np.ndarray]:
        width = padded_width(max(map(len, rows)), self.config.max_len)
        input_ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        return {"input_ids": input_ids, "attention_mask": mask}

    def embed_ids(
        self,
        ids: Sequence[list[int]],
        batch_size: int,
        on_batch: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Token id lists -> L2-normalised float32 rows, in batches of one padded width."""
        pooled = np.empty((len(ids), self.config.hidden), dtype=np.float32)

        def done(request: Any, rows: np.ndarray) -> None:
            pooled[rows] = request.get_output_tensor(0).data

        with self._lock:
            self.queue.set_callback(done)
            lengths = [len(i) for i in ids]
            for rows in length_batches(lengths, batch_size, self.config.max_len):
                self.queue.start_async(self._inputs([ids[i] for i in rows]), rows)
                if on_batch is not None:
                    on_batch(len(rows))
            self.queue.wait_all()
        x = pooled.astype(np.float64)
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return (x / np.where(norms > 0, norms, 1.0)).astype(np.float32)


#: a text of n tokens is padded to n rounded up to a multiple of this (see length_batches)
PAD_MULTIPLE = 8


def padded_width(n_tokens: int, max_len: int) -> int:
    """The width a text of ``n_tokens`` tokens is padded to, a function of its length only:
    the next multiple of :data:`PAD_MULTIPLE`, but not past ``max_len`` (nor below the text)."""
    return min(-(-n_tokens // PAD_MULTIPLE) * PAD_MULTIPLE, max(max_len, n_tokens))


def length_batches(lengths: Sequence[int], batch_size: int, max_len: int) -> list[np.ndarray]:
    """Indices in batches of at most ``batch_size`` texts of one :func:`padded_width` (widest
    first, then in input order).

    Padding changes a row's last bits (OpenVINO's kernels sum over the padded width), while at
    a fixed width neither the batch's size nor its other rows do (measured on all-MiniLM-L6-v2,
    1,500 real paragraphs: embedded in one call, in batches of 3 in reverse order, or in two
    calls, 0 differ from the paragraph embedded alone; padded instead to the longest row of a
    batch of 8, as before, 59 of 400 did, by up to 1.6e-7). A width fixed by the text's own
    length makes its vector a function of the text alone, whatever else the same call embeds,
    so cold runs that share an embedding cache stay bit-for-bit reproducible. Throughput on
    real paragraphs is that of padding to the batch's longest row (143 vs 142 texts a second,
    300-text calls, 2 cores); no padding at all (equal lengths only) costs ~10% there, in
    part-filled batches.
    """
    width = np.asarray([padded_width(int(n), max_len) for n in lengths], dtype=np.int64)
    order = np.argsort(-width, kind="stable")
    starts = np.flatnonzero(width[order][1:] != width[order][:-1]) + 1
    out: list[np.ndarray] = []
    for group in np.split(order, starts):
        out.extend(group[i : i + batch_size] for i in range(0, len(group), batch_size))
    return out


def progress(total: int, desc: str, threshold: int = 256) -> Any:
    """A tqdm bar on stderr (rate and time left) for more than ``threshold`` items, or None."""
    if total <= threshold:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit="text", dynamic_ncols=True, mininterval=1.0)


def _main(argv: list[str]) -> int:
    """``python -m smartvector.openvino_backend MODEL_DIR IDENTITY EXPORT_ROOT``: the child
    process of :func:`start_export`. Quiet on failure (exit 1): the parent converts again
    in-process and reports the error."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup (finally)
    model_dir, identity, export_root = Path(argv[0]), argv[1], Path(argv[2])
    try:
        ensure_export(model_dir, identity, export_root, export)
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the parent says it
        return 130
    except Exception:  # noqa: BLE001 - the parent retries and reports
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
