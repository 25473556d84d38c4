"""What one indexing job is asked to do (``IndexConfig``), checked before anything loads.

The command line fills it from flags; benchmarks and tests build it directly. The backend is a
parsed ``BackendSpec``: parsed once on the way in (a spec string given here is parsed here), and
handed as such to the writer stage and the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vsparta.indexer.items import validate_shard
from vsparta.indexer.reader import INPUT_FORMATS
from vsparta.model.config_parts import DEFAULT_TOP_N
from vsparta.termindex.plugin import BackendSpec
from vsparta.termindex.registry import parse_spec

MODEL_TOP_N = "model"  # IndexConfig.top_n when --top-n is not given: the model config's


@dataclass
class IndexConfig:
    """Everything one indexing job needs; the CLI fills it from flags."""

    input: Path
    input_format: str = "auto"
    backend: BackendSpec | None = None  # a spec string is parsed once, here
    export_jsonl: Path | None = None
    export_docs_per_file: int = 10_000
    model: Path | None = None
    tokenizer: Path | None = None
    top_n: int | None | Literal["model"] = MODEL_TOP_N  # "model": the model config's top_n
    min_weight: float = 0.0  # terms lighter than this are not indexed (a row's heaviest always is)
    batch_size: int = 32
    workers: int = 1
    device: str = "auto"
    amp: bool | None = None
    resume: bool = False
    prune: bool = False  # after a complete run: delete this shard's documents the input no longer lists
    max_delete: int | None = None  # --prune removes nothing when it would remove more (rsync's option)
    shard: int = 0
    num_shards: int = 1
    failures: Path | None = None
    max_pixels: int | None = None
    ignore_regions: bool = False
    commit_interval: float = 1.0  # seconds a document may wait to share an engine write
    progress: bool | None = None  # None/True: a bar on a terminal, log lines otherwise; False: nothing
    fast_decode: bool = True  # JPEG draft mode + reducing_gap resize (see indexer.decoder)
    follow_symlinks: bool = False  # index links whose target lies outside the input folder
    gpu_decode: bool | None = None  # nvJPEG for plain JPEGs; None: when the device is CUDA with torchvision
    fake_encoder: bool = False  # instant deterministic terms, no model: measures the plumbing
    fake_image_size: int = 224
    backend_options: dict[str, Any] = field(default_factory=dict)  # engine options (--shards ...)

    def __post_init__(self) -> None:
        if isinstance(self.backend, str):
            self.backend = parse_spec(self.backend)

    def validate(self) -> None:
        if self.fake_encoder and self.model is not None:
            raise ValueError("give either --model or --fake-encoder, not both")
        if self.fake_image_size < 1:
            raise ValueError(f"--fake-image-size must be >= 1, got {self.fake_image_size}")
        if self.backend is None and self.export_jsonl is None:
            raise ValueError("nothing to write to: give --backend and/or --export-jsonl")
        if self.input_format not in INPUT_FORMATS:
            raise ValueError(f"--format must be one of {INPUT_FORMATS}, got {self.input_format!r}")
        if self.batch_size < 1:
            raise ValueError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.workers < 0:
            raise ValueError(f"--workers must be >= 0, got {self.workers}")
        if not 0 <= self.commit_interval <= 3600:
            raise ValueError(f"--commit-interval must be in [0, 3600] seconds, got {self.commit_interval}")
        if self.max_pixels is not None and self.max_pixels < 1:
            raise ValueError(f"--max-pixels must be >= 1, got {self.max_pixels}")
        if self.device not in {"auto", "cpu", "cuda"} and not self.device.startswith("cuda:"):
            raise ValueError(f"--device must be auto, cpu or cuda, got {self.device!r}")
        if self.max_delete is not None and (self.max_delete < 0 or not self.prune):
            raise ValueError(
                f"--max-delete limits --prune: give --prune and a count >= 0, got {self.max_delete}"
            )
        validate_shard(self.shard, self.num_shards)


def check_needs(config: IndexConfig, fmt: str, *, encoder_given: bool = False) -> None:
    """What this input format needs from the options: raised before any model loads."""
    if fmt == "terms":
        if config.tokenizer is None and config.model is None:
            raise ValueError("term-document input needs --tokenizer (or --model) to map tokens to ids")
    elif config.model is None and not config.fake_encoder and not encoder_given:
        raise ValueError("--model (or --fake-encoder) is required to encode images or regions")


def resolve_top_n(top_n: int | None | str, encoder: object) -> int | None:
    """``--top-n`` as given, or when not given (``MODEL_TOP_N``) the model config's ``top_n``
    (``DEFAULT_TOP_N`` for inputs without a model: term documents, the fake encoder)."""
    if top_n != MODEL_TOP_N:
        return top_n  # type: ignore[return-value]
    return getattr(getattr(encoder, "config", None), "top_n", DEFAULT_TOP_N)
