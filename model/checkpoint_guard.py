"""Judge a checkpoint from config.json and its weights' header before allocating anything.

Order (cheapest first, each refusal one sentence): config.json (a capped regular file, JSON, a
family we run, every value typed and bounded by the family's reader); the parameters and the
float32 bytes it implies against the caps and the memory this machine has; the weights file (a
capped regular file: model.safetensors, or for a family that allows it pytorch_model.bin opened
memory-mapped with ``torch.load(weights_only=True)``), its header size, tensor count, dtypes, and
every name and shape against the family's table. The tokenizer's files are judged next
(model/tokenizer_guard.py); only then does the pipeline (model/checkpoint.py) build the model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from lang import Msg
from model.checkpoint_files import (
    HEADER_LIMIT,
    MB,
    TensorEntry,
    file_of,
    read_header,
    read_json_object,
    regular_file,
    shown,
    size_text,
)
from model.config import TransformerConfig
from model.config_values import CONFIG, model_type_of
from model.family import Family, expected_shapes, n_params
from model.load_errors import ConfigRefused, WeightsRefused

WEIGHTS, BIN_WEIGHTS = "model.safetensors", "pytorch_model.bin"
SHARDED = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
CONFIG_LIMIT = 1 * MB  # a config.json is a few kB
FLOAT_DTYPES = ("F32", "F16", "BF16", "F64")  # weights are converted to float32 after judging
TORCH_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
TORCH_DTYPES[torch.float64] = "F64"
MEMINFO = Path("/proc/meminfo")
# Sentences said in several places (lang.Msg patterns; ui/zh_CN.json has their Chinese).
NO_FILE = "{name} has no {file}."
MISSING_WEIGHTS = "{name} is missing {n} weights, e.g. {key}."
WRONG_SHAPE = "{name}: {key} has shape {shape} but its config implies {expected}."


@dataclass(frozen=True)
class Wanted:
    """What a caller will load: the families it accepts (by model_type) and the caps."""

    families: dict[str, Family]  # config.json's model_type -> the family that reads it
    said: str  # those families, for people: "BERT", "GPT-2, LLaMA, Qwen2 and Mistral"
    max_bytes: int | None = None  # float32 weights (and a weights file) at most this large
    max_params: int | None = None


@dataclass(frozen=True)
class Judged:
    """A checkpoint that passed every check of its config and weights."""

    config: TransformerConfig
    family: Family
    weights: Path  # model.safetensors or pytorch_model.bin
    file_keys: dict[str, str]  # HF name -> the key in the weights file
    state: dict | None = None  # a .bin's memory-mapped tensors


# ---- config.json ---------------------------------------------------------------------------------
def read_config(folder: Path, name: str) -> dict:
    """config.json of a folder: a capped regular file holding a JSON object."""
    if regular_file(folder / CONFIG, file_of(name, CONFIG), CONFIG_LIMIT) is None:
        raise ConfigRefused(Msg(NO_FILE, name=name, file=CONFIG))
    return read_json_object(folder / CONFIG, file_of(name, CONFIG), CONFIG_LIMIT)


def judge_config(hf: dict, name: str, wanted: Wanted) -> tuple[Family, TransformerConfig]:
    """The family and our config of a config.json, once its size fits the caps and memory."""
    family = wanted.families[model_type_of(hf, name, tuple(wanted.families), wanted.said)]
    config = family.read_config(hf, name)
    check_budget(expected_shapes(config, family), name, wanted)
    return family, config


# ---- memory --------------------------------------------------------------------------------------
def available_memory() -> int | None:
    """Bytes this machine can give a new model now (Linux's MemAvailable); None when unknown."""
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def memory_needed(shapes: dict[str, tuple[int, ...]]) -> int:
    """Bytes to load: every weight in float32, plus the largest tensor read while converting."""
    largest = max((n_params({k: s}) for k, s in shapes.items()), default=0)
    return 4 * (n_params(shapes) + largest)


def check_budget(shapes: dict, name: str, wanted: Wanted) -> None:
    """Refuse a model over the parameter cap, or whose float32 weights exceed the byte cap or
    the memory this machine has available."""
    count, needed, available = n_params(shapes), memory_needed(shapes), available_memory()
    if wanted.max_params is not None and count > wanted.max_params:
        raise ConfigRefused(
            Msg(
                "{name} has {n:,.0f}M parameters; the limit is {limit:,.0f}M.",
                name=name,
                n=count / 1e6,
                limit=wanted.max_params / 1e6,
            )
        )
    if wanted.max_bytes is not None and needed > wanted.max_bytes:
        raise ConfigRefused(
            Msg(
                "{name} needs about {size} in float32; the limit is {limit}.",
                name=name,
                size=size_text(needed),
                limit=size_text(wanted.max_bytes),
            )
        )
    if available is not None and needed > available:
        raise ConfigRefused(
            Msg(
                "{name} needs about {size} of memory in float32; this machine has {available} "
                "available.",
                name=name,
                size=size_text(needed),
                available=size_text(available),
            )
        )


# ---- the weights file ----------------------------------------------------------------------------
def weights_file(folder: Path, name: str, family: Family, limit: int) -> Path:
    """model.safetensors (or pytorch_model.bin, where the family allows); else one sentence."""
    files = (WEIGHTS, BIN_WEIGHTS) if family.reads_bin else (WEIGHTS,)
    for file in files:
        if regular_file(folder / file, file_of(name, file), limit) is not None:
            return folder / file
    sharded = [file for file in SHARDED if (folder / file).exists()]
    if sharded:
        raise WeightsRefused(
            Msg(
                "{name} is split into several weight files ({file}); only a single weights file "
                "is loaded.",
                name=name,
                file=sharded[0],
            )
        )
    if family.reads_bin:
        raise WeightsRefused(
            Msg("{name} has no {file} or {bin}.", name=name, file=WEIGHTS, bin=BIN_WEIGHTS)
        )
    found = sorted(p.name for p in folder.glob("*.bin")) + sorted(
        p.name for p in folder.glob("*.pt")
    )
    hint = (
        Msg(" (found {files}: pickled weights are never loaded)", files=", ".join(found))
        if found
        else ""
    )
    raise WeightsRefused(
        Msg(
            "{name} has no {file}; only safetensors weights are loaded{hint}.",
            name=name,
            file=WEIGHTS,
            hint=hint,
        )
    )


def bin_entries(path: Path, what: str) -> tuple[dict[str, TensorEntry], dict]:
    """A pytorch_model.bin opened memory-mapped (nothing read into memory), tensors only."""
    try:  # weights_only: tensors and plain containers, never code; mmap: no copy in memory
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # a legacy (non-zip) file, a bad pickle, a forbidden global
        raise WeightsRefused(
            Msg(
                "{what} could not be read safely ({kind}); convert it to model.safetensors.",
                what=what,
                kind=type(exc).__name__,
            )
        ) from None
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise WeightsRefused(Msg("{what} is not a flat dictionary of named tensors.", what=what))
    entries = {
        key: TensorEntry(TORCH_DTYPES.get(t.dtype, str(t.dtype)), tuple(t.shape))
        for key, t in state.items()
    }
    return entries, state


def match_keys(
    header: dict[str, TensorEntry], config: TransformerConfig, family: Family, name: str
) -> dict[str, str]:
    """HF name -> the file's key, once every tensor's name, dtype and shape fits the config."""
    expected = expected_shapes(config, family)
    unused = {source.key for source in family.top.values()} - set(expected)  # a tied head
    found: dict[str, str] = {}
    for key, entry in header.items():
        hf_key = family.hf_name(key)
        if family.not_weights.match(hf_key) or hf_key in unused:
            continue  # a task head, a buffer; a tied head's copy of the embedding (HF ignores it)
        if hf_key not in expected:
            raise WeightsRefused(
                Msg(
                    "{name} has a weight this model does not know: {key}.",
                    name=name,
                    key=shown(key),
                )
            )
        if hf_key in found:
            raise WeightsRefused(
                Msg(
                    "{name} holds {key} twice (with and without its model's prefix).",
                    name=name,
                    key=shown(hf_key),
                )
            )
        if entry.dtype not in FLOAT_DTYPES:
            raise WeightsRefused(
                Msg(
                    "{name}: {key} is stored as {dtype}; only float32, float16, bfloat16 and "
                    "float64 weights can be loaded (convert the file first; quantized checkpoints "
                    "are not loaded).",
                    name=name,
                    key=key,
                    dtype=entry.dtype,
                )
            )
        if entry.shape != expected[hf_key]:
            raise WeightsRefused(
                Msg(
                    WRONG_SHAPE,
                    name=name,
                    key=hf_key,
                    shape=str(entry.shape),
                    expected=str(expected[hf_key]),
                )
            )
        found[hf_key] = key
    missing = [k for k in expected if k not in found]
    if missing:
        raise WeightsRefused(Msg(MISSING_WEIGHTS, name=name, n=len(missing), key=repr(missing[0])))
    return found


def judge_weights(
    folder: Path, name: str, family: Family, config: TransformerConfig, wanted: Wanted
) -> Judged:
    """The weights file's tensors against the family's table (the config then fits the file)."""
    shapes = expected_shapes(config, family)
    # A cap, else float64 at most 8 bytes a number, plus the header (a .bin: its pickle).
    limit = wanted.max_bytes or 8 * n_params(shapes) + 2 * HEADER_LIMIT
    weights = weights_file(folder, name, family, limit)
    what = file_of(name, weights.name)
    state = None
    if weights.name == WEIGHTS:
        header = read_header(weights, what, limit)
    else:
        header, state = bin_entries(weights, what)
    config = family.fit(config, {family.hf_name(key) for key in header})
    file_keys = match_keys(header, config, family, name)
    return Judged(config, family, weights, file_keys, state)
