"""Load a Hugging Face checkpoint into OUR Transformer: one pipeline for every family.

    resolve the source → judge config.json → judge the weights → the tokenizer → fill our model

Each family (BERT: model/bert.py; GPT-2 and the LLaMA family: model/lm_families.py) is a table
the pipeline reads: how its config.json becomes our config, which HF tensor fills which of our
weights, which tokenizer files it brings. Everything is judged before a tensor or module is
allocated (model/checkpoint_guard.py, model/tokenizer_guard.py); then the model is built with
uninitialised weights and filled one tensor at a time, each converted to float32. Every refusal
is one sentence (a ``lang.Msg``), its type saying which stage refused (model/load_errors.py).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import torch

from lang import Msg
from model.bert import BERT
from model.checkpoint_files import file_of
from model.checkpoint_guard import Judged, Wanted, judge_config, judge_weights, read_config
from model.checkpoint_source import bundled_bert, resolve_source
from model.config import TransformerConfig
from model.device import pick_device
from model.embeddings import SinusoidalPositionalEncoding
from model.family import Source, weight_map
from model.lm_config import LM_FAMILIES_SAID
from model.lm_families import LM_FAMILIES
from model.load_errors import (
    ConfigRefused,
    SourceNotFound,
    TokenizerRefused,
    WeightsRefused,
    refused_as,
)
from model.registry import REGISTRY, prepared_folder
from model.rotary import RotaryEmbedding
from model.tokenizer_guard import check_tokenizer_files, load_tokenizer
from model.transformer import Transformer

DEFAULT_MAX_BYTES = 2 * 1024**3  # BERT-large is 1.34 GB in float32
DEFAULT_MAX_PARAMS = 400_000_000  # BERT-large has 335M
COMPUTED_BUFFERS = {
    "embedding.rotary.inv_freq",
    "embedding.rotary_local.inv_freq",
    "embedding.pos_emb.encoding",
    "embedding.scale",
}


# ---- fill our model ------------------------------------------------------------------------------
def unfilled_model(config: TransformerConfig, tokenizer) -> Transformer:
    """Our model with uninitialised weights, for ``fill`` to write every one of them: the seeded
    random init of every number (most of GPT-2's load time) would be thrown away."""
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
    if emb.rotary_local is not None:
        emb.rotary_local = RotaryEmbedding(config.d_head, config.rope_local_theta)
    if emb.scale is not None:
        emb.scale = torch.tensor(config.d_model**0.5)
    if isinstance(emb.pos_emb, SinusoidalPositionalEncoding):
        emb.pos_emb = SinusoidalPositionalEncoding(config.max_len, config.d_model)
    return net.eval()


def copy_weights(
    model: Transformer, judged: Judged, read: Callable[[str], torch.Tensor], name: str
) -> None:
    """Fill every weight of ``model`` from ``read(file key)``, one HF tensor at a time, in float32;
    asserts that each of our weights is written exactly once."""
    ours = model.state_dict()  # shares storage with the parameters
    by_source: dict[str, list[tuple[str, Source]]] = {}
    for key, source in weight_map(model.config, judged.family, ours).items():
        by_source.setdefault(source.key, []).append((key, source))
    written: list[str] = []
    with torch.no_grad():
        for hf_key, targets in by_source.items():
            tensor = read(judged.file_keys[hf_key])
            for key, source in targets:
                part = tensor
                if source.part is not None:
                    index, parts = source.part
                    part = part.chunk(parts, dim=-1)[index]  # (..., out / parts)
                if source.transpose:
                    part = part.T  # Conv1D [in, out] -> Linear [out, in]
                if part.shape != ours[key].shape:  # the file changed since it was judged
                    raise WeightsRefused(
                        Msg(
                            "{name}: {hf_key} gives {key} the shape {shape}, not {expected}.",
                            name=name,
                            hf_key=hf_key,
                            key=key,
                            shape=str(tuple(part.shape)),
                            expected=str(tuple(ours[key].shape)),
                        )
                    )
                ours[key].copy_(part)
                written.append(key)
    tied = {"lm_head.weight"} if model.config.tie_lm_head else set()
    assert sorted(written) == sorted(set(ours) - tied), "every weight written exactly once"


def fill(model: Transformer, judged: Judged, name: str) -> None:
    """Copy the judged tensors in, from the safetensors file or the memory-mapped .bin."""
    from safetensors import SafetensorError, safe_open

    try:
        if judged.state is not None:
            copy_weights(model, judged, judged.state.__getitem__, name)
            return
        with safe_open(str(judged.weights), framework="pt") as f:
            copy_weights(model, judged, f.get_tensor, name)
    except (SafetensorError, OSError, RuntimeError) as exc:
        raise WeightsRefused(
            Msg(
                "{what} could not be read ({kind}).",
                what=file_of(name, judged.weights.name),
                kind=type(exc).__name__,
            )
        ) from None


# ---- the pipeline --------------------------------------------------------------------------------
def judge_checkpoint(folder: Path, name: str, wanted: Wanted) -> Judged:
    """A checkpoint folder whose config.json, weights and tokenizer files passed every check."""
    with refused_as(ConfigRefused):
        family, config = judge_config(read_config(folder, name), name, wanted)
    with refused_as(WeightsRefused):
        judged = judge_weights(folder, name, family, config, wanted)
    with refused_as(TokenizerRefused):
        check_tokenizer_files(folder, name, family.tokenizer, judged.config.vocab_size)
    return judged


def load_checkpoint(
    source: str | Path | None,
    wanted: Wanted,
    device: str | torch.device | None = None,
    default: Callable[[], tuple[Path, str]] | None = None,
) -> tuple[Transformer, object]:
    """(Transformer in eval mode, tokenizer) of a checkpoint of one of the wanted families.

    Raises:
        SourceNotFound, ConfigRefused, WeightsRefused, TokenizerRefused: one sentence, raised
            before the model is allocated (a CheckpointError each).
    """
    with refused_as(SourceNotFound):
        folder, name = resolve_source(source, wanted, default)
    judged = judge_checkpoint(folder, name, wanted)
    with refused_as(TokenizerRefused):
        tokenizer = load_tokenizer(folder, name, judged.family, judged.config)
    config, pad = judged.config, tokenizer.pad_token_id
    if judged.family.pad_from_tokenizer and isinstance(pad, int) and 0 <= pad < config.vocab_size:
        config = config.replace(pad_id=pad)
    model = unfilled_model(config, tokenizer)
    with refused_as(WeightsRefused):
        fill(model, judged, name)  # asserts that every weight is written
    return model.to(pick_device(device if device is None else str(device))).eval(), tokenizer


def bert_wanted(
    max_bytes: int | None = DEFAULT_MAX_BYTES, max_params: int | None = DEFAULT_MAX_PARAMS
) -> Wanted:
    """What load_bert accepts: BERT checkpoints within the caps."""
    return Wanted({"bert": BERT}, "BERT", max_bytes, max_params)


def lm_wanted(max_bytes: int | None = None) -> Wanted:
    """What load_lm accepts: GPT-2 and LLaMA-family checkpoints that fit in memory."""
    return Wanted(LM_FAMILIES, Msg(LM_FAMILIES_SAID), max_bytes)


def load_bert(
    source: str | Path | None = None,
    device: str | torch.device | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_params: int = DEFAULT_MAX_PARAMS,
):
    """Load a BERT checkpoint into our encoder, in eval mode, and its WordPiece tokenizer.

    Args:
        source: None for the bundled all-MiniLM-L6-v2, a local folder, or a hub id.
        device: "cpu", "cuda", "auto" or None (auto: CUDA when available).
        max_bytes: refuse weight files, and float32 weights, larger than this.
        max_params: refuse models with more parameters than this.
    Returns:
        (Transformer, BertTokenizerFast).
    Raises:
        CheckpointError: one sentence saying what is wrong (not BERT, missing file, bad shapes...),
            raised before any tensor or module is allocated.
    """
    return load_checkpoint(source, bert_wanted(max_bytes, max_params), device, bundled_bert)


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
        CheckpointError: one sentence saying what is wrong, raised before the model is allocated.

    ``"smollm2-135m"`` and ``"gemma-3-270m"`` open real weights installed from the package
    registry, offline (model/registry.py); where SmolLM2's package is absent and the Hub is
    reachable, its name takes the published weights instead.
    """
    wanted = lm_wanted(max_bytes)
    if str(name_or_path) in REGISTRY:
        return load_checkpoint(registered_source(str(name_or_path), wanted), wanted, device)
    return load_checkpoint(name_or_path, wanted, device)


def registered_source(name: str, wanted: Wanted) -> str | Path:
    """The folder a registered model opens from: prepared from its installed GGUF, or, where
    the package is missing and the Hub reachable, the published weights' Hub id."""
    entry = REGISTRY[name]
    try:
        with refused_as(SourceNotFound):
            return prepared_folder(name, wanted)[0]
    except SourceNotFound:
        if entry.hub is not None and importlib.util.find_spec(entry.package) is None:
            from model.checkpoint_hub import hub_reachable

            if hub_reachable():
                return entry.hub
        raise
