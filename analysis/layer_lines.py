"""Where each step of a layer is written in code: the seed tutorials' own lines, and transformers'
own lines (LLaMA's, Qwen3's, Gemma 3's) for the pieces the tutorials do not write
(analysis.layer_steps quotes them; the lists are docs/layer-steps.md's "Which tutorial is
quoted").
"""

from __future__ import annotations

import re

# ---- the tutorials' lines -------------------------------------------------------------------
# LINES[key][seed]: the line, or {place: line}; place is the block the step belongs to:
# "encoder" (an encoder layer), "decoder" (a decoder layer's masked self-attention or its FFN),
# "cross" (a decoder layer's cross-attention). Keys are step names, or one of _ALIAS's values.
_000_RESIDUAL = {
    "encoder": "x = self.ln1( x_residual1 + self.dropout1(x) )",
    "decoder": "x = self.ln1( x_residual1 + self.dropout1(x) )",
    "cross": "x = self.ln2( x_residual2 + self.dropout2(x) )",
}
_003_RESIDUAL = {
    "encoder": "out = self.norm1(residual + context)",
    "decoder": "dec_out = self.norm1(residual + context)",
    "cross": "dec_out = self.norm2(residual + context)",
}
_001_RESIDUAL = {
    "encoder": "h = x + self.attention.forward(norm_x, norm_x, norm_x)",
    "decoder": "x = x + self.mask_attention.forward(norm_x, norm_x, norm_x)",
    "cross": "h = x + self.attention.forward(norm_x, enc_out, enc_out)",
}
_000_FFN_RESIDUAL = {
    "encoder": "x = self.ln2( x_residual2 + self.dropout2(x) )",
    "decoder": "x = self.ln3( x_residual3 + self.dropout3(x) )",
}
_003_FFN_RESIDUAL = {
    "encoder": "out = self.norm2(residual + out)",
    "decoder": "dec_out = self.norm3(residual + out)",
}
_001_FFN = {
    "encoder": "out = h + self.feed_forward.forward(self.fnn_norm(h))",
    "decoder": "out = h + self.feed_forward.forward(self.ffn_norm(h))",
}
_004_FFN = "x = x + self.feed_forward(self.layer_norm_2(x))"
LINES: dict[str, dict[str, str | dict[str, str]]] = {
    "layer call": {  # "input" and "output": what the stack's loop passes in and gets back
        "000": {
            "encoder": "x = layer(x, mask)",
            "decoder": "trg = layer(trg, src, trg_mask, src_mask)",
        },
        "001": {"encoder": "x = layer(x)", "decoder": "x = layer(x, enc_out)"},
        "003": {
            "encoder": "out = layer(out, mask)",
            "decoder": "dec_out = layer(dec_out, enc_out, dec_mask, dec_enc_mask)",
        },
        "004": {"encoder": "x = layer(x, mask=mask)"},
    },
    "LayerNorm before attention": {
        "001": {
            "encoder": "norm_x = self.attention_norm(x)",
            "decoder": "norm_x = self.attention_norm_1(x)",
            "cross": "norm_x = self.attention_norm_2(x)",
        },
        "004": {"encoder": "hidden_state = self.layer_norm_1(x)"},
    },
    "Q": {
        "000": "q, k, v = self.w_q(q), self.w_k(k), self.w_v(v)",
        "003": "Q = self.W_Q(Q).view(N, -1, num_heads, d_k).transpose(1, 2)",
    },
    "K": {
        "000": "q, k, v = self.w_q(q), self.w_k(k), self.w_v(v)",
        "003": "K = self.W_K(K).view(N, -1, num_heads, d_k).transpose(1, 2)",
    },
    "V": {
        "000": "q, k, v = self.w_q(q), self.w_k(k), self.w_v(v)",
        "003": "V = self.W_V(V).view(N, -1, num_heads, d_v).transpose(1, 2)",
    },
    "Q heads": {
        "000": "q, k, v = self.split(q), self.split(k), self.split(v)",
        "003": "Q = self.W_Q(Q).view(N, -1, num_heads, d_k).transpose(1, 2)",
    },
    "K heads": {
        "000": "q, k, v = self.split(q), self.split(k), self.split(v)",
        "003": "K = self.W_K(K).view(N, -1, num_heads, d_k).transpose(1, 2)",
    },
    "V heads": {
        "000": "q, k, v = self.split(q), self.split(k), self.split(v)",
        "003": "V = self.W_V(V).view(N, -1, num_heads, d_v).transpose(1, 2)",
    },
    "scores": {
        "000": "scores = torch.matmul(Q, K_T) / math.sqrt(d_k)",
        "003": "scores = torch.matmul(Q, K.transpose(-1, -2)) / np.sqrt(d_k)",
        "004": "scores = torch.bmm(query, key.transpose(1, 2)) / sqrt(dim_k)",
    },
    "masked scores": {
        "000": "scores = scores.masked_fill(mask == 0, -1e9)",
        "003": "scores.masked_fill_(attn_mask, -1e4)",
        "004": 'scores = scores.masked_fill(mask == 0, -float("inf"))',
    },
    "attention weights": {
        "000": "attn_weights = self.softmax(scores)",
        "003": "attns = torch.softmax(scores, dim=-1)",
        "004": "weights = F.softmax(scores, dim=-1)",
    },
    "context": {
        "000": "output = torch.matmul(attn_weights, V)",
        "003": "output = torch.matmul(attns, V)",
        "004": "return torch.bmm(weights, value)",
    },
    "concat": {
        "000": "concat_tensor = sa_output.transpose(1, 2).contiguous()"
        ".view(batch_size, seq_len, d_model)",
        "003": "output = output.transpose(1, 2).contiguous().reshape(N, -1, d_v * num_heads)",
        "004": "x = torch.cat([\n    h(query, key, value, query_mask, key_mask, mask) for h in "
        "self.heads\n], dim=-1)",
    },
    "attention output": {
        "000": "mha_output = self.fc(concat_tensor)",
        "003": "output = self.W_out(output)",
        "004": "x = self.output_linear(x)",
    },
    "attention call": {  # a decoder layer's other attention, shown as one sublayer
        "000": {
            "decoder": "x = self.mha1(q=dec_out, k=dec_out, v=dec_out, mask=trg_mask)",
            "cross": "x = self.mha2(q=x, k=enc_out, v=enc_out, mask=src_mask)",
        },
        "001": _001_RESIDUAL,
        "003": {
            "decoder": "context = self.dec_attn(dec_in, dec_in, dec_in, dec_mask)",
            "cross": "context = self.enc_dec_attn(dec_out, enc_out, enc_out, dec_enc_mask)",
        },
    },
    "attention residual": {
        "000": _000_RESIDUAL,
        "001": _001_RESIDUAL,
        "003": _003_RESIDUAL,
        "004": {
            "encoder": "x = x + self.attention(hidden_state, hidden_state, hidden_state, mask=mask)"
        },
    },
    "LayerNorm after attention": {"000": _000_RESIDUAL, "003": _003_RESIDUAL},
    "LayerNorm before FFN": {"001": _001_FFN, "004": _004_FFN},
    "FFN hidden": {
        "000": "x = self.fc1(x)\nx = self.relu(x)",
        "003": "out = self.conv1(X.transpose(1, 2))\nout = self.relu(out)",
        "004": "x = self.linear_1(x)\nx = self.gelu(x)",
    },
    "FFN output": {
        "000": "x = self.fc2(x)",
        "003": "out = self.conv2(out).transpose(1, 2)",
        "004": "x = self.linear_2(x)",
    },
    "FFN residual": {
        "000": _000_FFN_RESIDUAL,
        "001": _001_FFN,
        "003": _003_FFN_RESIDUAL,
        "004": _004_FFN,
    },
    "LayerNorm after FFN": {"000": _000_FFN_RESIDUAL, "003": _003_FFN_RESIDUAL},
}
_ALIAS = {
    "input": "layer call",
    "output": "layer call",
    "LayerNorm before self-attention": "LayerNorm before attention",
    "LayerNorm before cross-attention": "LayerNorm before attention",
    "self-attention output": "attention call",
    "cross-attention output": "attention call",
    "self-attention residual": "attention residual",
    "cross-attention residual": "attention residual",
    "LayerNorm after self-attention": "LayerNorm after attention",
    "LayerNorm after cross-attention": "LayerNorm after attention",
}
_FFN_ACTIVATION = {"000": "relu", "003": "relu", "004": "gelu"}  # the tutorials' FFN


def seed_order(config) -> tuple[str, ...]:
    """The tutorials to quote, first choice first: the one the model follows (its config's
    source names it), then those of its norm (post: 000, 003; pre: 001), then the rest."""
    found = re.search(r"seed (\d{3})", config.source or "")
    # Seed 001 shows no attention internals: seed 000's MultiHeadAttention is this model's.
    family = ("000", "003", "004", "001") if config.norm == "post" else ("001", "000", "004", "003")
    own = (found.group(1),) if found else ()
    return own + tuple(s for s in family if s not in own)


def seed_line(name: str, place: str, config) -> tuple[str, str]:
    """("seed 00N", its line of code) for a step in a block ("encoder", "decoder", "cross")."""
    key = _ALIAS.get(name, name)
    table = LINES[key]
    order = seed_order(config)
    if key in ("FFN hidden", "FFN output"):  # GELU models quote a GELU tutorial, ReLU a ReLU one
        act = "gelu" if config.activation.startswith("gelu") else "relu"
        order = tuple(s for s in order if _FFN_ACTIVATION.get(s) == act) + order
    for seed in order:
        line = table.get(seed)
        if isinstance(line, dict):
            line = line.get(place) or (line.get("decoder") if place == "cross" else None)
        if line:
            return f"seed {seed}", line
    raise KeyError(f"no tutorial line for {name!r} in a {place} block")  # pragma: no cover


# ---- LLaMA's lines -----------------------------------------------------------------------------
# The tutorials have no RMSNorm, RoPE, grouped-query attention or gated MLP: a layer with any of
# them (LLaMA, Qwen2, Mistral; model.load_lm) quotes transformers' own LLaMA code instead, whose
# line numbers are those of LLAMA_VERSION (Qwen2's and Mistral's files copy these lines; the
# biases of Qwen2's q/k/v_proj are set in its __init__). Step name -> [(line number, line)].
LLAMA_FILE = "modeling_llama.py"
LLAMA_VERSION = "5.24.0"  # transformers; tests/test_layer_steps_lm.py reads the installed file
_QKV = (
    (242, "hidden_shape = (*input_shape, -1, self.head_dim)"),
    (244, "query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)"),
    (245, "key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)"),
    (246, "value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)"),
)
_LAYER_CALL = ((394, "hidden_states = decoder_layer("),)
_MLP = ((164, "down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))"),)
_ROTATE = (
    249,
    "query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)",
)
_RESIDUAL = ((308, "hidden_states = residual + hidden_states"),)
LLAMA_LINES: dict[str, tuple[tuple[int, str], ...]] = {
    "input": _LAYER_CALL,
    "RMSNorm before attention": ((297, "hidden_states = self.input_layernorm(hidden_states)"),),
    "Q": (_QKV[1],),
    "K": (_QKV[2],),
    "V": (_QKV[3],),
    "Q heads": (_QKV[0], _QKV[1]),
    "K heads": (_QKV[0], _QKV[2]),
    "V heads": (_QKV[0], _QKV[3]),
    "RoPE on Q": (
        (
            249,
            "query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)",
        ),
        (147, "q_embed = (q * cos) + (rotate_half(q) * sin)"),
    ),
    "RoPE on K": (
        (
            249,
            "query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)",
        ),
        (148, "k_embed = (k * cos) + (rotate_half(k) * sin)"),
    ),
    "K heads repeated": ((190, "key_states = repeat_kv(key, module.num_key_value_groups)"),),
    "V heads repeated": ((191, "value_states = repeat_kv(value, module.num_key_value_groups)"),),
    "scores": ((193, "attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling"),),
    "masked scores": ((195, "attn_weights = attn_weights + attention_mask"),),
    "attention weights": (
        (
            197,
            "attn_weights = nn.functional.softmax(attn_weights, dim=-1, "
            "dtype=torch.float32).to(query.dtype)",
        ),
    ),
    "context": ((199, "attn_output = torch.matmul(attn_weights, value_states)"),),
    "concat": (
        (200, "attn_output = attn_output.transpose(1, 2).contiguous()"),
        (269, "attn_output = attn_output.reshape(*input_shape, -1).contiguous()"),
    ),
    "attention output": ((270, "attn_output = self.o_proj(attn_output)"),),
    "attention residual": _RESIDUAL,
    "RMSNorm before FFN": ((312, "hidden_states = self.post_attention_layernorm(hidden_states)"),),
    "FFN gate": _MLP,
    "FFN up": _MLP,
    "FFN hidden": _MLP,
    "FFN output": _MLP,
    "FFN residual": ((314, "hidden_states = residual + hidden_states"),),
    "output": _LAYER_CALL,
}
LLAMA_LINES["LayerNorm before attention"] = LLAMA_LINES["RMSNorm before attention"]
LLAMA_LINES["LayerNorm before FFN"] = LLAMA_LINES["RMSNorm before FFN"]


# ---- Qwen3's and Gemma 3's lines ---------------------------------------------------------------
# Their layers add QK-norm (both) and Gemma's second norm after each sublayer, √d_model
# embeddings and a GELU-tanh gate: their steps quote their own files, these line numbers being
# those of FAMILY_VERSION.
FAMILY_VERSION = "5.25.0"  # transformers; tests/test_layer_steps_lm.py reads the installed files
QWEN3_FILE = "modeling_qwen3.py"
_Q3_QKV = (
    (243, "hidden_shape = (*input_shape, -1, self.head_dim)"),
    (
        245,
        "query_states = self.q_norm(self.q_proj(hidden_states).view(hidden_shape)).transpose(1, 2)",
    ),
    (
        246,
        "key_states = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)",
    ),
    (247, "value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)"),
)
_Q3_ROTATE = (
    250,
    "query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)",
)
_Q3_MLP = ((82, "down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))"),)
_Q3_CALL = ((407, "hidden_states = decoder_layer("),)
QWEN3_LINES: dict[str, tuple[tuple[int, str], ...]] = {
    "input": _Q3_CALL,
    "RMSNorm before attention": ((299, "hidden_states = self.input_layernorm(hidden_states)"),),
    "Q": (_Q3_QKV[1],),
    "K": (_Q3_QKV[2],),
    "V": (_Q3_QKV[3],),
    "Q heads": (_Q3_QKV[0], _Q3_QKV[1]),
    "K heads": (_Q3_QKV[0], _Q3_QKV[2]),
    "V heads": (_Q3_QKV[0], _Q3_QKV[3]),
    "QK-norm on Q": (_Q3_QKV[1],),
    "QK-norm on K": (_Q3_QKV[2],),
    "RoPE on Q": (_Q3_ROTATE, (160, "q_embed = (q * cos) + (rotate_half(q) * sin)")),
    "RoPE on K": (_Q3_ROTATE, (161, "k_embed = (k * cos) + (rotate_half(k) * sin)")),
    "K heads repeated": ((187, "key_states = repeat_kv(key, module.num_key_value_groups)"),),
    "V heads repeated": ((188, "value_states = repeat_kv(value, module.num_key_value_groups)"),),
    "scores": ((190, "attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling"),),
    "masked scores": ((192, "attn_weights = attn_weights + attention_mask"),),
    "attention weights": (
        (
            194,
            "attn_weights = nn.functional.softmax(attn_weights, dim=-1, "
            "dtype=torch.float32).to(query.dtype)",
        ),
    ),
    "context": ((196, "attn_output = torch.matmul(attn_weights, value_states)"),),
    "concat": (
        (197, "attn_output = attn_output.transpose(1, 2).contiguous()"),
        (271, "attn_output = attn_output.reshape(*input_shape, -1).contiguous()"),
    ),
    "attention output": ((272, "attn_output = self.o_proj(attn_output)"),),
    "attention residual": ((310, "hidden_states = residual + hidden_states"),),
    "RMSNorm before FFN": ((314, "hidden_states = self.post_attention_layernorm(hidden_states)"),),
    "FFN gate": _Q3_MLP,
    "FFN up": _Q3_MLP,
    "FFN hidden": _Q3_MLP,
    "FFN output": _Q3_MLP,
    "FFN residual": ((316, "hidden_states = residual + hidden_states"),),
    "output": _Q3_CALL,
}
GEMMA3_FILE = "modeling_gemma3.py"
_G3_SHAPE = (323, "hidden_shape = (*input_shape, -1, self.head_dim)")
_G3_QKV = {
    m: (n, f"{s}_states = self.{m}_proj(hidden_states).view(hidden_shape).transpose(1, 2)")
    for m, n, s in (("q", 325, "query"), ("k", 326, "key"), ("v", 327, "value"))
}
_G3_GAIN = (132, "output = output * (1.0 + self.weight.float())")  # Gemma3RMSNorm: 1 + w
_G3_ROTATE = (
    333,
    "query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)",
)
_G3_MLP = ((115, "down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))"),)
_G3_CALL = ((537, "hidden_states = decoder_layer("),)
# Layer 0's input: the token embeddings times √d_model (Gemma3TextScaledWordEmbedding)
GEMMA3_EMBED = (100, "return super().forward(input_ids) * self.embed_scale.to(self.weight.dtype)")
GEMMA3_LINES: dict[str, tuple[tuple[int, str], ...]] = {
    "input": _G3_CALL,
    "RMSNorm before attention": (
        (384, "hidden_states = self.input_layernorm(hidden_states)"),
        _G3_GAIN,
    ),
    "Q": (_G3_QKV["q"],),
    "K": (_G3_QKV["k"],),
    "V": (_G3_QKV["v"],),
    "Q heads": (_G3_SHAPE, _G3_QKV["q"]),
    "K heads": (_G3_SHAPE, _G3_QKV["k"]),
    "V heads": (_G3_SHAPE, _G3_QKV["v"]),
    "QK-norm on Q": ((329, "query_states = self.q_norm(query_states)"), _G3_GAIN),
    "QK-norm on K": ((330, "key_states = self.k_norm(key_states)"), _G3_GAIN),
    "RoPE on Q": (_G3_ROTATE, (228, "q_embed = (q * cos) + (rotate_half(q) * sin)")),
    "RoPE on K": (_G3_ROTATE, (229, "k_embed = (k * cos) + (rotate_half(k) * sin)")),
    "K heads repeated": ((259, "key_states = repeat_kv(key, module.num_key_value_groups)"),),
    "V heads repeated": ((260, "value_states = repeat_kv(value, module.num_key_value_groups)"),),
    "scores": ((262, "attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling"),),
    "masked scores": ((269, "attn_weights = attn_weights + attention_mask"),),
    "attention weights": (
        (
            272,
            "attn_weights = nn.functional.softmax(attn_weights, dim=-1, "
            "dtype=torch.float32).to(query.dtype)",
        ),
    ),
    "context": ((274, "attn_output = torch.matmul(attn_weights, value_states)"),),
    "concat": (
        (275, "attn_output = attn_output.transpose(1, 2).contiguous()"),
        (354, "attn_output = attn_output.reshape(*input_shape, -1).contiguous()"),
    ),
    "attention output": ((355, "attn_output = self.o_proj(attn_output)"),),
    "RMSNorm on attention output": (
        (394, "hidden_states = self.post_attention_layernorm(hidden_states)"),
    ),
    "attention residual": ((395, "hidden_states = residual + hidden_states"),),
    "RMSNorm before FFN": ((398, "hidden_states = self.pre_feedforward_layernorm(hidden_states)"),),
    "FFN gate": _G3_MLP,
    "FFN up": _G3_MLP,
    "FFN hidden": _G3_MLP,
    "FFN output": _G3_MLP,
    "RMSNorm on FFN output": (
        (400, "hidden_states = self.post_feedforward_layernorm(hidden_states)"),
    ),
    "FFN residual": ((401, "hidden_states = residual + hidden_states"),),
    "output": _G3_CALL,
}
# A language-model family -> (its file in transformers, the version its line numbers are of,
# its lines by step name)
FAMILIES = {
    "llama": (LLAMA_FILE, LLAMA_VERSION, LLAMA_LINES),
    "qwen3": (QWEN3_FILE, FAMILY_VERSION, QWEN3_LINES),
    "gemma3": (GEMMA3_FILE, FAMILY_VERSION, GEMMA3_LINES),
}


def family(config) -> str:
    """Whose transformers file a LLaMA-style layer quotes: Gemma 3's (sandwich norms), Qwen3's
    (QK-norm without them), else LLaMA's (Qwen2's and Mistral's files copy its lines)."""
    if getattr(config, "sandwich_norm", False):
        return "gemma3"
    return "qwen3" if getattr(config, "qk_norm", False) else "llama"


def family_line(name: str, config, first: bool = False) -> tuple[str, str] | None:
    """("modeling_gemma3.py:384, 132", its lines of code) for a step of a LLaMA-style layer, or
    None when its family's file has no line for it; ``first``: layer 0's input of a model that
    scales its embeddings by √d_model (Gemma) quotes that line before the layer call."""
    file, _, lines = FAMILIES[family(config)]
    found = lines.get(name)
    if found is None:
        return None
    if first and name == "input" and file == GEMMA3_FILE:
        found = (GEMMA3_EMBED, *found)
    where = ", ".join(str(number) for number, _ in found)
    return f"{file}:{where}", "\n".join(line for _, line in found)


def llama_style(config) -> bool:
    """Whether the layer has a piece the tutorials do not write (RMSNorm, RoPE, grouped-query
    attention, a gated MLP): its steps then quote transformers' LLaMA code."""
    return (
        config.norm_kind == "rms"
        or config.positions == "rotary"
        or config.kv_heads != config.n_heads
        or config.mlp == "gated"
    )


def llama_line(name: str) -> tuple[str, str]:
    """("modeling_llama.py:297", its line of code) for a step of a LLaMA-style layer."""
    found = LLAMA_LINES[name]
    where = ", ".join(str(number) for number, _ in found)
    return f"{LLAMA_FILE}:{where}", "\n".join(line for _, line in found)
