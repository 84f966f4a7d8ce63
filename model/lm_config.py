"""A language model's config.json (GPT-2, LLaMA, Qwen2, Mistral) read into our TransformerConfig.

Every value is judged before it is trusted (types, bounds, the features we implement); anything
the family's Hugging Face model would compute differently from ours is refused with a sentence.
The families are pre-norm decoders with a final norm and an LM head:

- gpt2: LayerNorm, learned positions, GELU (tanh) MLP, fused QKV with biases, tied head.
- llama: RMSNorm, RoPE, gated SiLU MLP, grouped-query attention, biases only if configured.
- qwen2: llama with biases on W_Q, W_K, W_V (not W_O).
- mistral: llama without biases, with a sliding-window attention band.
- qwen3: llama with QK-norm (an RMSNorm on each query and key head) and its own head width.
- gemma3_text: Gemma 3's text model: QK-norm, a second norm after each sublayer, RMSNorm gains
  stored as 1 + w, a GELU (tanh) gated MLP, embeddings times √d_model, and sliding-window
  layers (with their own RoPE base) among full ones.
"""

from __future__ import annotations

from lang import Msg
from model.checkpoint_files import file_of, shown
from model.config import TransformerConfig
from model.config_values import CONFIG, flag, model_type_of, number, whole_number
from model.config_values import activation as _activation_of
from model.load_errors import ConfigRefused

FAMILIES = ("gpt2", "llama", "qwen2", "mistral", "qwen3", "gemma3_text")
FAMILY_NAMES = {
    "gpt2": "GPT-2",
    "llama": "LLaMA",
    "qwen2": "Qwen2",
    "mistral": "Mistral",
    "qwen3": "Qwen3",
    "gemma3_text": "Gemma 3",
}
# HF hidden_act / activation_function -> our activation.
LM_ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}
# Bounds of every size: far above published models (Qwen2's vocabulary is 152k, LLaMA-3-70B is
# 8192 wide with 80 layers), each alone harmless; the memory estimate bounds their product.
MAX_VOCAB, MAX_WIDTH, MAX_HEADS, MAX_LAYERS = 1_000_000, 16384, 256, 256
MAX_D_FF, MAX_POSITIONS = 131072, 1 << 20
# Context lengths of the HF config classes, used when config.json leaves them out.
DEFAULT_MAX_LEN = {
    "gpt2": 1024,
    "llama": 2048,
    "qwen2": 32768,
    "mistral": 4096 * 32,
    "qwen3": 32768,
    "gemma3_text": 131072,
}
# HF config class defaults of tie_word_embeddings.
DEFAULT_TIED = {
    "gpt2": True,
    "llama": False,
    "qwen2": False,
    "mistral": False,
    "qwen3": True,
    "gemma3_text": True,
}
LM_FAMILIES_SAID = "GPT-2, LLaMA, Qwen2, Qwen3, Mistral and Gemma 3"
GEMMA_THETA = {"full_attention": 1_000_000.0, "sliding_attention": 10_000.0}  # HF's defaults


def family_of(hf: dict, name: str) -> str:
    """config.json's model_type, when it is one of FAMILIES; else one sentence naming them."""
    return model_type_of(hf, name, FAMILIES, Msg(LM_FAMILIES_SAID))


def _activation(hf: dict, key: str, default: str, name: str) -> str:
    return _activation_of(hf, key, default, LM_ACTIVATIONS, name)


def _pad_id(hf: dict, vocab_size: int) -> int:
    """config.json's pad_token_id when it is a usable id; 0 otherwise (the tokenizer may say)."""
    pad = hf.get("pad_token_id")
    ok = isinstance(pad, int) and not isinstance(pad, bool) and 0 <= pad < vocab_size
    return pad if ok else 0


def _gpt2(hf: dict, name: str, what: str) -> dict:
    """GPT2LMHeadModel's architecture, or one sentence on what differs."""
    if flag(hf, "add_cross_attention", False, what):
        raise ConfigRefused(
            Msg("{name} has cross-attention; only decoder-only GPT-2 can be loaded.", name=name)
        )
    if not flag(hf, "scale_attn_weights", True, what):
        raise ConfigRefused(
            Msg("{name} does not scale its attention by 1/√d_head; not implemented.", name=name)
        )
    if flag(hf, "scale_attn_by_inverse_layer_idx", False, what):
        raise ConfigRefused(
            Msg("{name} scales attention by 1/(layer + 1); not implemented.", name=name)
        )
    flag(hf, "reorder_and_upcast_attn", False, what)  # float32 already: the same numbers
    d_model = whole_number(hf, "n_embd", 1, MAX_WIDTH, None, what)
    d_ff = 4 * d_model  # n_inner None: GPT-2's 4·d
    if hf.get("n_inner") is not None:
        d_ff = whole_number(hf, "n_inner", 1, MAX_D_FF, None, what)
    return {
        "vocab_size": whole_number(hf, "vocab_size", 1, MAX_VOCAB, None, what),
        "d_model": d_model,
        "n_heads": whole_number(hf, "n_head", 1, MAX_HEADS, None, what),
        "n_layers": whole_number(hf, "n_layer", 1, MAX_LAYERS, None, what),
        "d_ff": d_ff,
        "max_len": whole_number(hf, "n_positions", 1, MAX_POSITIONS, 1024, what),
        "activation": _activation(hf, "activation_function", "gelu_new", name),
        "positions": "learned",
        "layer_norm_eps": number(hf, "layer_norm_epsilon", 1e-5, 0, 1, what),
    }


LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


def rope(hf: dict, name: str, what: str, theta: float = 10000.0) -> dict:
    """rope_theta and rope_llama3 from transformers 5's rope_parameters or 4's rope_theta and
    rope_scaling: plain RoPE, or LLaMA 3.1's scaling; other scalings are refused."""
    params, scaling = hf.get("rope_parameters"), hf.get("rope_scaling")
    settings, kind = {"rope_theta": hf.get("rope_theta", theta)}, "default"
    for found in (params, scaling):
        if found is None:
            continue
        if not isinstance(found, dict):
            raise ConfigRefused(Msg("{what} has rope settings that are not an object.", what=what))
        settings |= found
        kind = found.get("rope_type", found.get("type", kind))
    if kind not in ("default", "llama3"):
        raise ConfigRefused(
            Msg(
                "{name} scales its rotary positions ({kind}); only plain RoPE and LLaMA 3's "
                "scaling (rope_type 'default' or 'llama3') are implemented.",
                name=name,
                kind=shown(kind),
            )
        )
    if settings.get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ConfigRefused(
            Msg("{name} turns only part of each head (partial_rotary_factor).", name=name)
        )
    found = {"rope_theta": number(settings, "rope_theta", 10000.0, 1, 1e12, what)}
    if kind == "llama3":
        factors = [number(settings, key, None, 0, 1e9, what) for key in LLAMA3_KEYS[:3]]
        context = whole_number(settings, LLAMA3_KEYS[3], 1, MAX_POSITIONS, None, what)
        found["rope_llama3"] = (*factors, context)
    return found


def sliding_window(hf: dict, family: str, n_layers: int, name: str, what: str) -> int | None:
    """Mistral's attention band (every layer), Qwen2's when every layer has it; None = none."""
    window = hf.get("sliding_window")
    if family in ("qwen2", "qwen3"):
        types = hf.get("layer_types")
        if not isinstance(types, list):  # transformers 4: use_sliding_window, max_window_layers
            on = flag(hf, "use_sliding_window", False, what)
            first = hf.get("max_window_layers", n_layers)
            types = ["sliding_attention" if on and i >= first else "full" for i in range(n_layers)]
        sliding = {t == "sliding_attention" for t in types}
        if sliding == {True, False}:
            raise ConfigRefused(
                Msg(
                    "{name} uses sliding-window attention in some layers only; not implemented.",
                    name=name,
                )
            )
        if sliding != {True}:
            return None
    elif family != "mistral" or window is None:
        return None
    return whole_number(hf, "sliding_window", 1, MAX_POSITIONS, None, what)


def _llama(hf: dict, family: str, name: str, what: str) -> dict:
    """LlamaForCausalLM's architecture (Qwen2's, Mistral's), or one sentence on what differs."""
    d_model = whole_number(hf, "hidden_size", 1, MAX_WIDTH, None, what)
    n_heads = whole_number(hf, "num_attention_heads", 1, MAX_HEADS, None, what)
    n_kv = whole_number(hf, "num_key_value_heads", 1, MAX_HEADS, n_heads, what)
    n_layers = whole_number(hf, "num_hidden_layers", 1, MAX_LAYERS, None, what)
    head_dim = None  # d_model / n_heads
    if hf.get("head_dim") is not None:
        head_dim = whole_number(hf, "head_dim", 1, MAX_WIDTH, None, what)
        if not d_model % n_heads and head_dim == d_model // n_heads:
            head_dim = None
    if family == "llama":
        bias = flag(hf, "attention_bias", False, what)
        biases = (bias, bias, flag(hf, "mlp_bias", False, what))
    elif family == "qwen3":  # Qwen3Attention: attention_bias on all four projections
        bias = flag(hf, "attention_bias", False, what)
        biases = (bias, bias, False)
    else:  # Qwen2: W_Q, W_K, W_V have biases, W_O has none; Mistral: no biases
        biases = (family == "qwen2", False, False)
    return {
        "vocab_size": whole_number(hf, "vocab_size", 1, MAX_VOCAB, None, what),
        "d_model": d_model,
        "n_heads": n_heads,
        "n_kv_heads": n_kv,
        "n_layers": n_layers,
        "d_ff": whole_number(hf, "intermediate_size", 1, MAX_D_FF, None, what),
        "max_len": whole_number(
            hf, "max_position_embeddings", 1, MAX_POSITIONS, DEFAULT_MAX_LEN[family], what
        ),
        "activation": _activation(hf, "hidden_act", "silu", name),
        "positions": "rotary",
        **rope(hf, name, what),
        "norm_kind": "rms",
        "layer_norm_eps": number(hf, "rms_norm_eps", 1e-6, 0, 1, what),
        "mlp": "gated",
        "attn_bias": biases[0],
        "attn_out_bias": biases[1],
        "mlp_bias": biases[2],
        "sliding_window": sliding_window(hf, family, n_layers, name, what),
        "head_dim": head_dim,
        "qk_norm": family == "qwen3",
    }


def _gemma_layers(hf: dict, n_layers: int, name: str, what: str) -> dict:
    """Gemma 3's layer kinds (layer_types, or every sliding_window_pattern-th layer full) and
    each kind's RoPE base (rope_parameters per kind, or rope_theta / rope_local_base_freq)."""
    types = hf.get("layer_types")
    if types is None:
        pattern = whole_number(hf, "sliding_window_pattern", 1, MAX_LAYERS, 6, what)
        types = [
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)
        ]
    kinds = ("sliding_attention", "full_attention")
    if not isinstance(types, list) or len(types) != n_layers or set(types) - set(kinds):
        raise ConfigRefused(
            Msg(
                "{what} sets layer_types to {value}; it must name each of the {n} layers "
                "'sliding_attention' or 'full_attention'.",
                what=what,
                value=shown(types),
                n=n_layers,
            )
        )
    params = hf.get("rope_parameters")
    by_kind = params if isinstance(params, dict) and set(params) <= set(kinds) else {}
    full = dict(hf, rope_parameters=by_kind.get("full_attention", params))
    found = rope(full, name, what, GEMMA_THETA["full_attention"])
    local = by_kind.get("sliding_attention") or {
        "rope_theta": hf.get("rope_local_base_freq", GEMMA_THETA["sliding_attention"])
    }
    local = rope({"rope_parameters": local}, name, what, GEMMA_THETA["sliding_attention"])
    if "rope_llama3" in local:
        raise ConfigRefused(
            Msg("{name} scales the sliding layers' RoPE; not implemented.", name=name)
        )
    window = whole_number(hf, "sliding_window", 1, MAX_POSITIONS, 4096, what)
    return {
        **found,
        "layer_types": tuple(types),
        "rope_local_theta": local["rope_theta"],
        "sliding_window": window if "sliding_attention" in types else None,
    }


def _gemma3(hf: dict, name: str, what: str) -> dict:
    """Gemma3ForCausalLM's text model, or one sentence on what differs."""
    # The sizes as LLaMA's; the layer kinds and each kind's RoPE are read by _gemma_layers.
    plain = dict(hf, layer_types=None, rope_parameters=None, rope_scaling=None)
    sizes = _llama(plain, "llama", name, what)
    d_head = whole_number(hf, "head_dim", 1, MAX_WIDTH, 256, what)
    scalar = hf.get("query_pre_attn_scalar", 256)
    if scalar != d_head:
        raise ConfigRefused(
            Msg(
                "{name} scales its attention scores by 1/√{scalar} (query_pre_attn_scalar), not "
                "1/√d_head = 1/√{d_head}; not implemented.",
                name=name,
                scalar=shown(scalar),
                d_head=d_head,
            )
        )
    for key in ("final_logit_softcapping", "attn_logit_softcapping"):
        if hf.get(key) is not None:
            raise ConfigRefused(
                Msg("{name} caps its logits ({key}); not implemented.", name=name, key=key)
            )
    if flag(hf, "use_bidirectional_attention", False, what):
        raise ConfigRefused(
            Msg("{name} attends both ways; only causal Gemma 3 is implemented.", name=name)
        )
    bias = flag(hf, "attention_bias", False, what)
    return {
        **sizes,
        **_gemma_layers(hf, sizes["n_layers"], name, what),
        "head_dim": d_head
        if sizes["d_model"] % sizes["n_heads"] or d_head != sizes["d_model"] // sizes["n_heads"]
        else None,
        "activation": _activation(hf, "hidden_activation", "gelu_pytorch_tanh", name),
        "layer_norm_eps": number(hf, "rms_norm_eps", 1e-6, 0, 1, what),
        "max_len": whole_number(
            hf, "max_position_embeddings", 1, MAX_POSITIONS, DEFAULT_MAX_LEN["gemma3_text"], what
        ),
        "attn_bias": bias,
        "attn_out_bias": bias,
        "mlp_bias": False,
        "qk_norm": True,
        "sandwich_norm": True,
        "norm_offset": True,
        "embed_scale": True,
    }


def lm_config(hf: dict, name: str) -> TransformerConfig:
    """Our decoder config from a judged config.json; one sentence for whatever we do not run."""
    what = file_of(name, CONFIG)
    family = family_of(hf, name)
    if family == "gpt2":
        sizes = _gpt2(hf, name, what)
    elif family == "gemma3_text":
        sizes = _gemma3(hf, name, what)
    else:
        sizes = _llama(hf, family, name, what)
    try:
        return TransformerConfig(
            name=name,
            arch="decoder",
            norm="pre",
            final_norm=True,
            dropout=0.0,
            lm_head=True,
            lm_head_bias=False,
            tie_lm_head=flag(hf, "tie_word_embeddings", DEFAULT_TIED[family], what),
            pad_id=_pad_id(hf, sizes["vocab_size"]),
            source=f"{FAMILY_NAMES[family]} checkpoint {name}",
            **sizes,
        )
    except ValueError as exc:
        raise ConfigRefused(
            Msg("{what} is not usable: {reason}", what=what, reason=str(exc))
        ) from None
