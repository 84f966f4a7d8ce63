"""Which Hugging Face tensor fills which weight of our decoder: explicit tables, asserted both ways.

Our names on the left, HF's on the right ({i} the layer). GPT-2 stores its linears as Conv1D,
weight [in, out] (transposed into nn.Linear's [out, in]), and W_Q, W_K, W_V fused in one c_attn
[d, 3d] (split along its output in that order). The LLaMA family stores nn.Linear as we do.
The HF shape of every tensor follows from our model's: ``expected_shapes`` builds the model on
PyTorch's meta device (shapes, no memory), so the tables are checked before anything is allocated,
and ``copy_weights`` checks every shape again as it copies.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from model.checkpoint_files import TensorEntry, shown
from model.checkpoint_guard import FLOAT_DTYPES
from model.config import TransformerConfig
from model.lm_config import LMLoadError
from model.transformer import Transformer


@dataclass(frozen=True)
class Source:
    """Where one of our weights comes from: a HF tensor, maybe transposed, maybe a part of it."""

    key: str  # HF's name, without the "transformer." / "model." prefix
    transpose: bool = False  # Conv1D [in, out] -> nn.Linear [out, in]
    part: tuple[int, int] | None = None  # (index, parts) of a fused tensor, split on its last dim


QKV = (("w_q", 0), ("w_k", 1), ("w_v", 2))
GPT2_TOP = {
    "embedding.tok_emb.weight": Source("wte.weight"),
    "embedding.pos_emb.weight": Source("wpe.weight"),
    "decoder.final_norm.weight": Source("ln_f.weight"),
    "decoder.final_norm.bias": Source("ln_f.bias"),
    "lm_head.weight": Source("lm_head.weight"),  # untied only
}
GPT2_LAYER = {
    "add_norm1.norm.weight": Source("ln_1.weight"),
    "add_norm1.norm.bias": Source("ln_1.bias"),
    **{f"self_attn.{w}.weight": Source("attn.c_attn.weight", True, (j, 3)) for w, j in QKV},
    **{f"self_attn.{w}.bias": Source("attn.c_attn.bias", False, (j, 3)) for w, j in QKV},
    "self_attn.w_o.weight": Source("attn.c_proj.weight", True),
    "self_attn.w_o.bias": Source("attn.c_proj.bias"),
    "add_norm3.norm.weight": Source("ln_2.weight"),
    "add_norm3.norm.bias": Source("ln_2.bias"),
    "ffn.fc1.weight": Source("mlp.c_fc.weight", True),
    "ffn.fc1.bias": Source("mlp.c_fc.bias"),
    "ffn.fc2.weight": Source("mlp.c_proj.weight", True),
    "ffn.fc2.bias": Source("mlp.c_proj.bias"),
}
LLAMA_TOP = {
    "embedding.tok_emb.weight": Source("embed_tokens.weight"),
    "decoder.final_norm.weight": Source("norm.weight"),
    "lm_head.weight": Source("lm_head.weight"),  # untied only
}
LLAMA_LINEARS = {
    "self_attn.w_q": "self_attn.q_proj",
    "self_attn.w_k": "self_attn.k_proj",
    "self_attn.w_v": "self_attn.v_proj",
    "self_attn.w_o": "self_attn.o_proj",
    "ffn.w_gate": "mlp.gate_proj",
    "ffn.w_up": "mlp.up_proj",
    "ffn.w_down": "mlp.down_proj",
}
LLAMA_LAYER = {
    "add_norm1.norm.weight": Source("input_layernorm.weight"),
    "add_norm3.norm.weight": Source("post_attention_layernorm.weight"),
    **{
        f"{ours}.{p}": Source(f"{hf}.{p}")
        for ours, hf in LLAMA_LINEARS.items()
        for p in ("weight", "bias")
    },
}
TABLES = {"gpt2": (GPT2_TOP, GPT2_LAYER), "llama": (LLAMA_TOP, LLAMA_LAYER)}
PREFIXES = {"gpt2": "transformer.", "llama": "model."}  # LMHeadModel's; bare models have none
# Tensors a checkpoint may carry that are no weights: GPT-2's causal-mask buffers, old LLaMA's
# RoPE frequencies (we compute them from rope_theta).
NOT_WEIGHTS = {
    "gpt2": re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$"),
    "llama": re.compile(r"^layers\.\d+\.self_attn\.rotary_emb\.inv_freq$"),
}
OUR_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.+)$")


def table_of(family: str) -> str:
    """The weight table a family uses: GPT-2's or LLaMA's (Qwen2 and Mistral are LLaMA's)."""
    return "gpt2" if family == "gpt2" else "llama"


def meta_weights(config: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our state dict for ``config`` on the meta device: names and shapes, no memory."""
    with torch.device("meta"):
        return Transformer(config).state_dict()


def weight_map(
    config: TransformerConfig, family: str, ours: dict[str, torch.Tensor] | None = None
) -> dict[str, Source]:
    """Our state-dict key -> its HF source, for every weight a model of ``config`` has."""
    top, layer = TABLES[table_of(family)]
    ours = dict(meta_weights(config) if ours is None else ours)
    if config.tie_lm_head:
        ours.pop("lm_head.weight")  # the token embedding's matrix
    sources = {}
    for key in ours:
        match = OUR_LAYER.match(key)
        source = top.get(key) if match is None else layer.get(match[2])
        assert source is not None, f"no HF source for {key}"  # a new weight needs a table row
        if match is not None:
            source = Source(f"{prefix(family)}{match[1]}.{source.key}", *_rest(source))
        sources[key] = source
    return sources


def prefix(family: str) -> str:
    """The prefix of a layer's HF keys: "h." (GPT-2) or "layers." (LLaMA family)."""
    return "h." if family == "gpt2" else "layers."


def _rest(source: Source) -> tuple:
    return source.transpose, source.part


def expected_shapes(config: TransformerConfig, family: str) -> dict[str, tuple[int, ...]]:
    """HF key -> the shape our model implies for it (a fused tensor: its parts side by side)."""
    ours = meta_weights(config)
    shapes: dict[str, tuple[int, ...]] = {}
    for key, source in weight_map(config, family, ours).items():
        shape = tuple(ours[key].shape)
        if source.transpose:
            shape = shape[::-1]
        if source.part is not None:
            shape = (*shape[:-1], shape[-1] * source.part[1])
        assert shapes.setdefault(source.key, shape) == shape, source.key  # parts agree
    return shapes


def n_params(shapes: dict[str, tuple[int, ...]]) -> int:
    """Numbers in the tensors of ``expected_shapes``."""
    return sum(math.prod(shape) for shape in shapes.values())


def match_keys(
    header: dict[str, TensorEntry], config: TransformerConfig, family: str, name: str
) -> dict[str, str]:
    """HF key -> the file's key, once every tensor's name, dtype and shape fits the config."""
    expected = expected_shapes(config, family)
    strip, skip = PREFIXES[table_of(family)], NOT_WEIGHTS[table_of(family)]
    found: dict[str, str] = {}
    for key, entry in header.items():
        hf_key = key.removeprefix(strip)
        if skip.match(hf_key) or (hf_key == "lm_head.weight" and config.tie_lm_head):
            continue  # not a weight; a tied head's copy of the embedding (HF ignores it too)
        if hf_key not in expected:
            raise LMLoadError(f"{name} has a weight this model does not know: {shown(key)}.")
        if hf_key in found:
            raise LMLoadError(f"{name} holds {shown(hf_key)} twice (with and without {strip!r}).")
        if entry.dtype not in FLOAT_DTYPES:
            raise LMLoadError(
                f"{name}: {key} is stored as {entry.dtype}; only float32, float16, bfloat16 and "
                "float64 weights can be loaded (quantized checkpoints are not)."
            )
        if entry.shape != expected[hf_key]:
            raise LMLoadError(
                f"{name}: {hf_key} has shape {entry.shape} but its config implies "
                f"{expected[hf_key]}."
            )
        found[hf_key] = key
    missing = [k for k in expected if k not in found]
    if missing:
        raise LMLoadError(f"{name} is missing {len(missing)} weights, e.g. {missing[0]!r}.")
    return found


def copy_weights(
    model: Transformer,
    family: str,
    file_keys: dict[str, str],
    read: Callable[[str], torch.Tensor],
    name: str,
) -> None:
    """Fill every weight of ``model`` from ``read(file key)``, one HF tensor at a time, in float32;
    asserts that each of our weights is written exactly once."""
    ours = model.state_dict()  # shares storage with the parameters
    by_source: dict[str, list[tuple[str, Source]]] = {}
    for key, source in weight_map(model.config, family, ours).items():
        by_source.setdefault(source.key, []).append((key, source))
    written: list[str] = []
    with torch.no_grad():
        for hf_key, targets in by_source.items():
            tensor = read(file_keys[hf_key])
            for key, source in targets:
                part = tensor
                if source.part is not None:
                    index, parts = source.part
                    part = part.chunk(parts, dim=-1)[index]  # (..., out / parts)
                if source.transpose:
                    part = part.T  # Conv1D [in, out] -> Linear [out, in]
                if part.shape != ours[key].shape:  # the file changed since it was judged
                    raise LMLoadError(
                        f"{name}: {hf_key} gives {key} the shape {tuple(part.shape)}, not "
                        f"{tuple(ours[key].shape)}."
                    )
                ours[key].copy_(part)
                written.append(key)
    tied = {"lm_head.weight"} if model.config.tie_lm_head else set()
    assert sorted(written) == sorted(set(ours) - tied), "every weight written exactly once"
