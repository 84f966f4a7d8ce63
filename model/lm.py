"""Load a GPT-2, LLaMA, Qwen2 or Mistral checkpoint into OUR Transformer (a pre-norm decoder).

A local folder (config.json, model.safetensors or else pytorch_model.bin, the tokenizer's files)
or a Hub id (config.json is fetched and judged first; then only safetensors weights and the
tokenizer's files are downloaded). Judged before anything is allocated, cheapest first:
config.json (capped, JSON, a family we run, every size typed and bounded), the memory the model
needs in float32 against what this machine has, the weights' names, dtypes and shapes (the
safetensors header; a .bin is opened memory-mapped with ``torch.load(weights_only=True)``), the
tokenizer's files. Then the model is built and filled one tensor at a time (model/lm_weights.py).
Every refusal is one sentence (LMLoadError, a BertLoadError); never pickle code, never
``trust_remote_code``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from model.bert import HUB_ID, HUB_ID_MAX
from model.bert import _local_folder as local_folder
from model.checkpoint_files import (
    HEADER_LIMIT,
    BertLoadError,
    TensorEntry,
    file_of,
    read_header,
    read_json_object,
    regular_file,
    shown,
    size_text,
)
from model.checkpoint_guard import (
    CONFIG,
    CONFIG_LIMIT,
    SMALL_FILE_LIMIT,
    VOCAB_FILE_LIMIT,
    WEIGHTS,
    check_tokenizer_ids,
    check_tokenizer_json,
)
from model.config import TransformerConfig
from model.device import pick_device
from model.embeddings import SinusoidalPositionalEncoding
from model.lm_config import LMLoadError, family_of, lm_config
from model.lm_weights import copy_weights, expected_shapes, match_keys, n_params
from model.rotary import RotaryEmbedding
from model.transformer import Transformer

BIN_WEIGHTS = "pytorch_model.bin"
SHARDED = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
# Files AutoTokenizer may open, and how large each may be.
LM_TOKENIZER_LIMITS = {
    "tokenizer.json": VOCAB_FILE_LIMIT,
    "vocab.json": VOCAB_FILE_LIMIT,  # GPT-2's BPE vocabulary
    "merges.txt": VOCAB_FILE_LIMIT,  # and its merges
    "tokenizer.model": VOCAB_FILE_LIMIT,  # SentencePiece (LLaMA 1/2, Mistral)
    "tokenizer_config.json": SMALL_FILE_LIMIT,
    "special_tokens_map.json": SMALL_FILE_LIMIT,
    "added_tokens.json": SMALL_FILE_LIMIT,
    "chat_template.jinja": SMALL_FILE_LIMIT,
    "chat_template.json": SMALL_FILE_LIMIT,
}
JSON_FILES = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
MAX_CHAT_TEMPLATES = 64  # files in additional_chat_templates/
TORCH_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
TORCH_DTYPES[torch.float64] = "F64"
MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class Judged:
    """A checkpoint that passed every check: what to build and where its tensors are."""

    config: TransformerConfig
    family: str
    weights: Path  # model.safetensors or pytorch_model.bin
    file_keys: dict[str, str]  # HF key -> the key in the weights file


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


def check_memory(shapes: dict, name: str, max_bytes: int | None) -> None:
    """Refuse a model whose float32 weights would not fit in memory (or in max_bytes)."""
    needed, available = memory_needed(shapes), available_memory()
    if max_bytes is not None and needed > max_bytes:
        raise LMLoadError(
            f"{name} needs about {size_text(needed)} in float32; the limit is "
            f"{size_text(max_bytes)}."
        )
    if available is not None and needed > available:
        raise LMLoadError(
            f"{name} needs about {size_text(needed)} of memory in float32; this machine has "
            f"{size_text(available)} available."
        )


# ---- the weights file ----------------------------------------------------------------------------
def _bin_entries(path: Path, what: str) -> tuple[dict[str, TensorEntry], dict]:
    """A pytorch_model.bin opened memory-mapped (nothing read into memory), tensors only."""
    try:  # weights_only: tensors and plain containers, never code; mmap: no copy in memory
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # a legacy (non-zip) file, a bad pickle, a forbidden global
        raise LMLoadError(
            f"{what} could not be read safely ({type(exc).__name__}); convert it to "
            "model.safetensors."
        ) from None
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise LMLoadError(f"{what} is not a flat dictionary of named tensors.")
    entries = {
        key: TensorEntry(TORCH_DTYPES.get(t.dtype, str(t.dtype)), tuple(t.shape))
        for key, t in state.items()
    }
    return entries, state


def _weights_file(folder: Path, name: str, limit: int) -> Path:
    """model.safetensors, else pytorch_model.bin; one sentence when neither is there."""
    for file in (WEIGHTS, BIN_WEIGHTS):
        if regular_file(folder / file, file_of(name, file), limit) is not None:
            return folder / file
    sharded = [file for file in SHARDED if (folder / file).exists()]
    if sharded:
        raise LMLoadError(
            f"{name} is split into several weight files ({sharded[0]}); only one "
            f"{WEIGHTS} or {BIN_WEIGHTS} is loaded."
        )
    raise LMLoadError(f"{name} has no {WEIGHTS} or {BIN_WEIGHTS}.")


# ---- the tokenizer -------------------------------------------------------------------------------
def check_lm_tokenizer_files(folder: Path, name: str, vocab_size: int) -> None:
    """Every file AutoTokenizer may open is regular and capped; tokenizer.json fits the table."""
    present = {
        file: regular_file(folder / file, file_of(name, file), limit) is not None
        for file, limit in LM_TOKENIZER_LIMITS.items()
    }
    templates = folder / "additional_chat_templates"
    if templates.is_dir():
        found = list(templates.iterdir())[: MAX_CHAT_TEMPLATES + 1]
        if len(found) > MAX_CHAT_TEMPLATES:
            raise LMLoadError(f"{name} has more than {MAX_CHAT_TEMPLATES} chat templates.")
        for path in found:
            regular_file(path, file_of(name, f"{templates.name}/{path.name}"), SMALL_FILE_LIMIT)
    has_bpe = present["vocab.json"] and present["merges.txt"]
    if not (present["tokenizer.json"] or has_bpe or present["tokenizer.model"]):
        raise LMLoadError(
            f"{name} has no tokenizer.json, vocab.json and merges.txt, or tokenizer.model for "
            "its tokenizer."
        )
    if present["tokenizer.json"]:
        check_tokenizer_json(folder / "tokenizer.json", file_of(name, "tokenizer.json"), vocab_size)
    for file in JSON_FILES:
        if present[file]:
            read_json_object(folder / file, file_of(name, file), SMALL_FILE_LIMIT)


def load_lm_tokenizer(folder: Path, name: str, config: TransformerConfig):
    """AutoTokenizer from the judged folder (local files only, no remote code), padding with
    the end-of-text token when the tokenizer has no padding token of its own (GPT-2)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(
            str(folder), local_files_only=True, trust_remote_code=False
        )
    except Exception as exc:
        raise LMLoadError(
            f"{name}'s tokenizer could not be loaded ({type(exc).__name__}: "
            f"{shown(str(exc), 120)})."
        ) from None
    check_tokenizer_ids(tok.get_vocab(), name, config.vocab_size)
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    tok.model_max_length = min(tok.model_max_length, config.max_len)
    return tok


# ---- the whole judgment --------------------------------------------------------------------------
def read_lm_config(folder: Path, name: str) -> dict:
    """config.json of a folder: a capped regular file holding a JSON object."""
    if regular_file(folder / CONFIG, file_of(name, CONFIG), CONFIG_LIMIT) is None:
        raise LMLoadError(f"{name} has no {CONFIG}.")
    return read_json_object(folder / CONFIG, file_of(name, CONFIG), CONFIG_LIMIT)


def judge_lm(folder: Path, name: str, max_bytes: int | None = None) -> tuple[Judged, dict | None]:
    """A loadable checkpoint (and a .bin's memory-mapped tensors), or one sentence."""
    hf = read_lm_config(folder, name)
    family = family_of(hf, name)
    config = lm_config(hf, name)
    shapes = expected_shapes(config, family)
    check_memory(shapes, name, max_bytes)
    # float64 at most 8 bytes a number, plus the header (a .bin: its pickle) around them.
    weights = _weights_file(folder, name, 8 * n_params(shapes) + 2 * HEADER_LIMIT)
    what = file_of(name, weights.name)
    state = None
    if weights.name == WEIGHTS:
        header = read_header(weights, what, weights.stat().st_size)
    else:
        header, state = _bin_entries(weights, what)
    file_keys = match_keys(header, config, family, name)
    check_lm_tokenizer_files(folder, name, config.vocab_size)
    return Judged(config, family, weights, file_keys), state


# ---- where the files are -------------------------------------------------------------------------
def _hub_folder(repo_id: str, max_bytes: int | None) -> Path:
    """A Hub checkpoint's snapshot: config.json fetched and judged before any weight."""
    try:
        from huggingface_hub import constants, hf_hub_download, snapshot_download
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        raise LMLoadError("Loading from the Hugging Face Hub needs huggingface_hub.") from None
    try:
        config_path = Path(hf_hub_download(repo_id, CONFIG))
        hf = read_json_object(config_path, file_of(repo_id, CONFIG), CONFIG_LIMIT)
        config = lm_config(hf, repo_id)
        check_memory(expected_shapes(config, family_of(hf, repo_id)), repo_id, max_bytes)
        patterns = [CONFIG, WEIGHTS, *LM_TOKENIZER_LIMITS, "additional_chat_templates/*"]
        return Path(snapshot_download(repo_id, allow_patterns=patterns))
    except BertLoadError:
        raise
    except Exception as exc:  # offline, network, 404, auth: one sentence, no traceback
        if constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
            raise LMLoadError(
                f"{repo_id!r} is no folder here, and the Hugging Face Hub is switched off "
                "(HF_HUB_OFFLINE); give the folder that holds config.json and the weights."
            ) from None
        raise LMLoadError(
            f"Could not fetch {repo_id!r} from the Hugging Face Hub ({type(exc).__name__}); "
            "check the id and the network, or give a local folder."
        ) from None


def resolve_lm_source(name_or_path: str | Path, max_bytes: int | None = None) -> tuple[Path, str]:
    """(folder, display name) of a local folder or a Hub id; one sentence for anything else."""
    text = str(name_or_path).strip()
    if not text:
        raise LMLoadError("Give a folder or a Hugging Face Hub id of a language model.")
    folder = local_folder(text)
    if folder is not None:
        return folder, folder.name or text
    if HUB_ID.match(text) and len(text) <= HUB_ID_MAX:
        return _hub_folder(text, max_bytes), text
    raise LMLoadError(
        f"{shown(text, 200)} is neither an existing folder nor a Hugging Face Hub id."
    )


# ---- load ----------------------------------------------------------------------------------------
COMPUTED_BUFFERS = {"embedding.rotary.inv_freq", "embedding.pos_emb.encoding"}


def unfilled_model(config: TransformerConfig, tokenizer) -> Transformer:
    """Our model with uninitialised weights, for copy_weights to fill every one of them: the
    seeded random init of every number (most of GPT-2's load time) would be thrown away."""
    with torch.device("meta"):
        net = Transformer(config, tokenizer=tokenizer)
    net = net.to_empty(device="cpu")  # new Parameters, from meta to CPU: tie the head again
    if config.tie_lm_head:
        net.lm_head.weight = net.embedding.tok_emb.weight
    # Buffers that are computed, not loaded (RoPE's θ_i, the sinusoid table): compute them again.
    persistent = set(net.state_dict())
    computed = {name for name, _ in net.named_buffers() if name not in persistent}
    assert computed <= COMPUTED_BUFFERS, computed  # a new computed buffer needs a line here
    emb = net.embedding
    if emb.rotary is not None:
        emb.rotary = RotaryEmbedding(config.d_head, config.rope_theta, config.rope_llama3)
    if isinstance(emb.pos_emb, SinusoidalPositionalEncoding):
        emb.pos_emb = SinusoidalPositionalEncoding(config.max_len, config.d_model)
    return net.eval()


def _fill(model: Transformer, judged: Judged, state: dict | None, name: str) -> None:
    """Copy the judged tensors in, from the safetensors file or the memory-mapped .bin."""
    from safetensors import SafetensorError, safe_open

    try:
        if state is not None:
            copy_weights(model, judged.family, judged.file_keys, state.__getitem__, name)
            return
        with safe_open(str(judged.weights), framework="pt") as f:
            copy_weights(model, judged.family, judged.file_keys, f.get_tensor, name)
    except (SafetensorError, OSError, RuntimeError) as exc:
        what = file_of(name, judged.weights.name)
        raise LMLoadError(f"{what} could not be read ({type(exc).__name__}).") from None


def load_lm(
    name_or_path: str | Path,
    device: str | torch.device | None = None,
    max_bytes: int | None = None,
):
    """Load a GPT-2, LLaMA, Qwen2 or Mistral checkpoint into our decoder, in eval mode, float32.

    Args:
        name_or_path: a local folder, or a Hugging Face Hub id (then downloaded: safetensors only).
        device: "cpu", "cuda", "auto" or None (auto: CUDA when available).
        max_bytes: refuse models needing more bytes than this in float32 (besides the memory the
            machine has available, which is always checked).
    Returns:
        (Transformer, tokenizer): the model's tokenizer is also ``net.tokenizer``.
    Raises:
        LMLoadError: one sentence saying what is wrong, raised before the model is allocated.
    """
    try:
        folder, name = resolve_lm_source(name_or_path, max_bytes)
        judged, state = judge_lm(folder, name, max_bytes)
        tokenizer = load_lm_tokenizer(folder, name, judged.config)
        config = judged.config
        pad = tokenizer.pad_token_id
        if isinstance(pad, int) and 0 <= pad < config.vocab_size:
            config = config.replace(pad_id=pad)
        model = unfilled_model(config, tokenizer)
        _fill(model, judged, state, name)  # asserts that every weight is written
        del state  # the .bin's memory map
    except LMLoadError:
        raise
    except BertLoadError as exc:  # the shared guards' sentences, as one error type
        raise LMLoadError(*exc.args) from None
    return model.to(pick_device(device if device is None else str(device))).eval(), tokenizer
