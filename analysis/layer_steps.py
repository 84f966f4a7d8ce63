"""One layer taken apart step by step: every intermediate tensor from its input to its output.

Vaswani et al. 2017 (§3.1-3.3) as the seed tutorials write it, in the layer's real order:

post-norm (the paper, seeds 000/002/003, BERT): X → MultiHead → X + · → LayerNorm → FFN → + → LN
pre-norm (seeds 001/004):                       X → LN → MultiHead → X + · → LN → FFN → X₁ + ·
LLaMA, Qwen2, Mistral (model.load_lm):          X → RMSNorm → Q, K, V → heads → RoPE on Q and K
    → K, V heads repeated for their query heads (grouped-query) → scores … W_O → X + · → RMSNorm
    → gate, up → SiLU(gate) ⊙ up → W_down → X₁ + ·

A decoder layer of an encoder-decoder adds cross-attention (Q from the decoder, K and V from the
encoder output C) between its masked self-attention and its FFN. The attention the ``stack``
names is taken apart in full (Q, K, V, heads, scores, mask, softmax, context, concat, W_O); a
decoder layer's other attention is one step (its sublayer output), so that the step list of
"decoder" and of "cross" both walk the whole layer from its input to its output.

Every step is computed from the trace's stored residual stream (the layer's input,
``trace.hidden_states``), the encoder output and the masks, by the model's own weights (read from
``net``, or from the model the trace replays, as analysis.block does), on the real tokens of one
text: a padded item keeps only its real positions (T = its real token count, S = its source's),
which give the same numbers as the padded batch (padded keys were hidden, -inf, and padding never
reaches a real token). STEP_NAMES lists every name in order; docs/layer-steps.md documents it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from analysis.tokens import check_stack, real_tokens
from analysis.weights import check_net
from model.attention import HeadAblation
from model.rotary import Rotation
from model.trace import Trace

# Every step name, in the order data flows; each architecture's list is a subsequence of this
# one (docs/layer-steps.md). "attention" is the attention of the stack asked for; in a decoder
# layer with cross-attention the other one is "self-attention …" (stack "cross") or
# "cross-attention …" (stack "decoder").
STEP_NAMES: tuple[str, ...] = (
    "input",
    "LayerNorm before self-attention",  # stack "cross", pre-norm
    "self-attention output",  # stack "cross"
    "self-attention residual",  # stack "cross"
    "LayerNorm after self-attention",  # stack "cross", post-norm
    "LayerNorm before attention",  # pre-norm
    "RMSNorm before attention",  # pre-norm with RMSNorm (LLaMA, Qwen2, Mistral)
    "Q",
    "K",
    "V",
    "Q heads",
    "K heads",
    "V heads",
    "RoPE on Q",  # rotary positions (LLaMA …)
    "RoPE on K",  # rotary positions
    "K heads repeated",  # grouped-query attention: H_kv key heads shared by H query heads
    "V heads repeated",  # grouped-query attention
    "scores",
    "masked scores",
    "attention weights",
    "context",
    "concat",
    "attention output",
    "attention residual",
    "LayerNorm after attention",  # post-norm
    "LayerNorm before cross-attention",  # stack "decoder" of an encoder-decoder, pre-norm
    "cross-attention output",  # stack "decoder" of an encoder-decoder
    "cross-attention residual",  # stack "decoder" of an encoder-decoder
    "LayerNorm after cross-attention",  # stack "decoder" of an encoder-decoder, post-norm
    "LayerNorm before FFN",  # pre-norm
    "RMSNorm before FFN",  # pre-norm with RMSNorm
    "FFN gate",  # gated MLP (LLaMA …): X W_gate
    "FFN up",  # gated MLP: X W_up
    "FFN hidden",  # act(X W_1 + b_1); gated MLP: SiLU(gate) ⊙ up
    "FFN output",
    "FFN residual",
    "LayerNorm after FFN",  # post-norm
    "output",
)


@dataclass(frozen=True)
class Step:
    """One intermediate of a layer, for one text.

    value: the whole tensor (CPU, float32), never cut or pooled: at 512 tokens "scores" is
        [H, 512, 512]; what a page shows of it is the page's business. Hidden entries of
        "masked scores" are -inf.
    shape: the named dimensions of ``value`` (T query tokens, S key tokens of cross-attention, H
        heads, d_k = d_model / H, d_ff the FFN width); ``value.shape`` gives the sizes.
    reads: the earlier steps it is computed from ("input" reads none; cross-attention's K and V,
        and the decoder view's "cross-attention output", also read C, the encoder output).
    seed, seed_line: the tutorial ("seed 000" … "seed 004") and its own line(s) of code that do
        this step, verbatim; several lines are joined by newlines.
    """

    name: str
    formula: str
    shape: str
    value: torch.Tensor
    seed: str
    seed_line: str
    note_en: str
    note_zh: str
    reads: tuple[str, ...] = ()


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


# ---- notes ----------------------------------------------------------------------------------
NOTES: dict[str, tuple[str, str]] = {
    "input": (
        "The residual stream entering this layer: one d_model vector per token.",
        "进入这一层的残差流：每个 token 一个 d_model 维向量。",
    ),
    "LayerNorm before self-attention": (
        "Pre-norm: each token's vector is normalised before the masked self-attention reads it.",
        "Pre-norm：掩码自注意力读取之前，先对每个 token 的向量做 LayerNorm。",
    ),
    "self-attention output": (
        "The masked self-attention sublayer (taken apart under the decoder stack), one vector a "
        "token.",
        "掩码自注意力子层的输出（在 decoder 栈里逐步拆开），每个 token 一个向量。",
    ),
    "self-attention residual": (
        "Residual connection: the self-attention output added to the layer's input.",
        "残差连接：把自注意力输出加回这一层的输入。",
    ),
    "LayerNorm after self-attention": (
        "Post-norm: Add & Norm normalises each token's sum (mean 0, variance 1, then γ and β).",
        "Post-norm：Add & Norm 对每个 token 的和做归一化（均值 0、方差 1，再乘 γ 加 β）。",
    ),
    "LayerNorm before attention": (
        "Pre-norm: each token's vector is normalised before the attention reads it; the residual "
        "keeps the un-normalised one.",
        "Pre-norm：注意力读取之前先做 LayerNorm；残差连接保留未归一化的向量。",
    ),
    "RMSNorm before attention": (
        "Pre-norm with RMSNorm (LLaMA): each token's vector is divided by its root mean square "
        "and scaled by g, no mean taken away and no bias; the residual keeps the un-normalised "
        "one.",
        "RMSNorm 形式的 Pre-norm（LLaMA）：每个 token 的向量除以它的均方根再乘以 g，"
        "不减均值、没有偏置；残差连接保留未归一化的向量。",
    ),
    "Q": (
        "Queries: what each token is looking for, one linear map of its vector.",
        "查询 Q：每个 token 要找什么，由它的向量经一次线性变换得到。",
    ),
    "K": (
        "Keys: what each token offers to be found by.",
        "键 K：每个 token 用来被匹配的特征。",
    ),
    "V": (
        "Values: what each token passes on when it is attended to.",
        "值 V：被关注时每个 token 传递出去的内容。",
    ),
    "Q heads": (
        "Q cut into H heads of d_k dimensions each; every head attends on its own.",
        "把 Q 切成 H 个头，每头 d_k 维；每个头独立做注意力。",
    ),
    "K heads": ("K cut into the same H heads.", "K 按同样方式切成 H 个头。"),
    "V heads": ("V cut into the same H heads.", "V 按同样方式切成 H 个头。"),
    "RoPE on Q": (
        "Rotary positions (RoPE): each head's query is turned pair of dimensions by pair, by an "
        "angle its position m times θ_i; nothing was added to the embedding.",
        "旋转位置编码（RoPE）：每个头的查询按维度两两成对旋转，角度为位置 m 乘以 θ_i；"
        "嵌入里没有加位置向量。",
    ),
    "RoPE on K": (
        "The keys turned the same way: the score of query m and key n then depends on m − n "
        "alone, the tokens' offset.",
        "键按同样方式旋转：查询 m 与键 n 的分数于是只取决于两者的距离 m − n。",
    ),
    "K heads repeated": (
        "Grouped-query attention: each key head is shared by a group of query heads, so it is "
        "repeated once for each query head of its group.",
        "分组查询注意力（GQA）：每个键头由一组查询头共用，因此为组里的每个查询头各复制一份。",
    ),
    "V heads repeated": (
        "The value heads repeated the same way: query head h reads value head h // (H / H_kv).",
        "值头按同样方式复制：查询头 h 读取值头 h // (H / H_kv)。",
    ),
    "scores": (
        "Every query against every key, per head, scaled by 1/√d_k so the softmax stays soft.",
        "每个头里每个查询与每个键的点积，再除以 √d_k，避免 softmax 过于尖锐。",
    ),
    "attention weights": (
        "Softmax over the keys: each row sums to 1 and says how much each key is read.",
        "对键做 softmax：每一行和为 1，表示读取每个键的比例。",
    ),
    "context": (
        "Each head's weighted sum of the value vectors: what the token gathers.",
        "每个头按注意力权重对值向量加权求和：这个 token 收集到的信息。",
    ),
    "concat": (
        "The heads' contexts side by side again: back to one d_model vector per token.",
        "把各头的结果重新拼接：回到每个 token 一个 d_model 维向量。",
    ),
    "attention output": (
        "The output projection W_O mixes the heads: the attention sublayer's output.",
        "输出投影 W_O 把各头混合起来：注意力子层的输出。",
    ),
    "attention residual": (
        "Residual connection: the attention output added to the vector it started from.",
        "残差连接：把注意力输出加回它出发时的向量。",
    ),
    "LayerNorm after attention": (
        "Post-norm: Add & Norm normalises each token's sum (mean 0, variance 1, then γ and β).",
        "Post-norm：Add & Norm 对每个 token 的和做归一化（均值 0、方差 1，再乘 γ 加 β）。",
    ),
    "LayerNorm before cross-attention": (
        "Pre-norm: the decoder's vectors are normalised before the cross-attention reads them.",
        "Pre-norm：交叉注意力读取之前，先对 decoder 的向量做 LayerNorm。",
    ),
    "cross-attention output": (
        "Cross-attention (taken apart under the cross stack): Q from the decoder, K and V from "
        "the encoder output C.",
        "交叉注意力的输出（在 cross 栈里逐步拆开）：Q 来自 decoder，K、V 来自 encoder 输出 C。",
    ),
    "cross-attention residual": (
        "Residual connection: the cross-attention output added to the decoder's vectors.",
        "残差连接：把交叉注意力输出加回 decoder 的向量。",
    ),
    "LayerNorm after cross-attention": (
        "Post-norm: Add & Norm after the cross-attention.",
        "Post-norm：交叉注意力之后的 Add & Norm。",
    ),
    "LayerNorm before FFN": (
        "Pre-norm: each token's vector is normalised before the FFN reads it.",
        "Pre-norm：前馈网络读取之前先做 LayerNorm。",
    ),
    "RMSNorm before FFN": (
        "Pre-norm with RMSNorm: each token's vector is normalised by its root mean square before "
        "the MLP reads it.",
        "RMSNorm 形式的 Pre-norm：MLP 读取之前，先用均方根对每个 token 的向量归一化。",
    ),
    "FFN gate": (
        "The gated MLP's gate: one linear map widens each token to d_ff numbers that will decide, "
        "through SiLU, how much of each feature passes.",
        "门控 MLP 的门：一次线性变换把每个 token 扩展到 d_ff 个数，"
        "经过 SiLU 后决定每个特征通过多少。",
    ),
    "FFN up": (
        "The gated MLP's up projection: a second linear map to d_ff features, the ones the gate "
        "scales.",
        "门控 MLP 的上投影：第二个线性变换得到 d_ff 个特征，由门来缩放。",
    ),
    "FFN hidden": (
        "The FFN's first linear layer widens each token to d_ff neurons, then the activation.",
        "前馈网络第一层把每个 token 扩展到 d_ff 个神经元，再经过激活函数。",
    ),
    "FFN output": (
        "The second linear layer maps the d_ff neurons back to d_model: the FFN's output.",
        "第二层把 d_ff 个神经元映射回 d_model：前馈网络的输出。",
    ),
    "FFN residual": (
        "Residual connection: the FFN output added to the vector it read.",
        "残差连接：把前馈网络输出加回它读入的向量。",
    ),
    "LayerNorm after FFN": (
        "Post-norm: the second Add & Norm.",
        "Post-norm：第二个 Add & Norm。",
    ),
    "output": (
        "The layer's output: the residual stream the next layer reads (hidden_states[layer + 1]).",
        "这一层的输出：下一层读取的残差流（hidden_states[layer + 1]）。",
    ),
}
_CONVENTION = {  # how the quoted tutorial hides a score, said beside this model's -inf
    "000": (
        " Seed 000 writes -1e9 where mask == 0; this model adds -inf: after the softmax both "
        "are 0.",
        " seed 000 在 mask == 0 处写 -1e9；本模型加 -inf：softmax 之后都是 0。",
    ),
    "003": (
        " Seed 003 writes -1e4 where its mask is True (True = hidden there; here True = may "
        "attend).",
        " seed 003 在 mask 为 True 处写 -1e4（那里 True 表示屏蔽；这里 True 表示可以关注）。",
    ),
    "004": (" Seed 004 writes -inf too.", " seed 004 同样写 -inf。"),
    "llama": (
        " LLaMA's code adds the lowest float32 (about -3.4e38) where hidden; this model adds "
        "-inf: after the softmax both are 0.",
        " LLaMA 的代码在屏蔽处加上 float32 的最小值（约 -3.4e38）；本模型加 -inf：softmax "
        "之后都是 0。",
    ),
}
_ACT = {
    "relu": "max(0, {x})",
    "gelu": "GELU({x})",
    "gelu_tanh": "GELU_tanh({x})",
    "silu": "SiLU({x})",
}


def _b(linear: nn.Linear, name: str) -> str:
    """ " + b_Q" in a formula when the projection has a bias (LLaMA's have none)."""
    return f" + b_{name}" if linear.bias is not None else ""


def _mask_note(
    kind: str, hidden: int, total: int, seed: str, window: int | None = None
) -> tuple[str, str]:
    if kind == "causal" and window is not None:
        en = (
            f"The causal mask with a sliding window of {window} (Mistral): a token sees only "
            f"itself and the {window - 1} tokens before it; {hidden} of the {total} scores per "
            "head (above the diagonal, or too far back) become -inf."
        )
        zh = (
            f"带滑动窗口 {window} 的因果掩码（Mistral）：每个 token 只能看到自己和它之前的 "
            f"{window - 1} 个 token；每个头 {total} 个分数中有 {hidden} 个（对角线以上或太远的）"
            "变为 -inf。"
        )
    elif kind == "causal":
        en = (
            f"The causal mask: a token sees only itself and earlier tokens; {hidden} of the "
            f"{total} scores per head (above the diagonal) become -inf."
        )
        zh = (
            f"因果掩码：每个 token 只能看到自己和之前的 token；每个头 {total} 个分数中"
            f"对角线以上的 {hidden} 个变为 -inf。"
        )
    elif hidden:
        en = f"The padding mask: {hidden} of the {total} scores per head become -inf."
        zh = f"padding 掩码：每个头 {total} 个分数中有 {hidden} 个变为 -inf。"
    else:
        en = (
            "The padding mask hides padded keys (-inf); among this text's real tokens it hides "
            "none, so the scores pass unchanged."
        )
        zh = (
            "padding 掩码屏蔽补齐的键（-inf）；在这段文本的真实 token 之间没有要屏蔽的，"
            "分数原样通过。"
        )
    convention = "llama" if seed.startswith(LLAMA_FILE) else seed.removeprefix("seed ")
    extra = _CONVENTION.get(convention, ("", ""))
    return en + extra[0], zh + extra[1]


# ---- the computation ------------------------------------------------------------------------
def _layers(trace: Trace, stack: str, net: nn.Module | None) -> tuple[nn.ModuleList, Callable]:
    """The layers of the stack's home (the decoder for "cross"), from net or the trace's model,
    and the model's RoPE angles (seq_len, positions) -> Rotation | None."""
    home = "decoder" if stack == "cross" else stack
    if net is not None:
        check_net(trace, net, stack, "The layer's steps")
        return (net.encoder if home == "encoder" else net.decoder).layers, net.embedding.rotation
    replay = trace._replay
    if replay is None or home not in replay.stacks:
        raise ValueError(
            "The layer's steps need the model's weights, which this trace no longer reaches: "
            "pass net=<the model that made the trace>."
        )
    replay._check(replay.stacks[home])  # eval mode, weights unchanged since the trace
    return replay.stacks[home].layers, replay.rotation


def _linear(x: torch.Tensor, linear: nn.Linear) -> torch.Tensor:
    return F.linear(x, linear.weight, linear.bias)


def unsupported(config) -> str | None:
    """What of the config the steps do not take apart (no model the project loads has it)."""
    if getattr(config, "norm_kind", "layer") == "rms" and (
        config.norm == "post" or config.arch == "encoder-decoder"
    ):
        return "RMSNorm in a post-norm or encoder-decoder layer"
    return None


def _attend(
    attn: nn.Module,
    x_q: torch.Tensor,
    x_kv: torch.Tensor,
    allowed: torch.Tensor,
    keep: torch.Tensor | None,
    mode: str,
    rotation: Rotation | None = None,
) -> dict[str, torch.Tensor]:
    """MultiHeadAttention of one text, every intermediate kept (model/attention.py's order: split,
    RoPE on Q and K, a shared key/value head repeated for its group, scores, …)."""
    n_heads, d_k, n_rep = attn.n_heads, attn.d_head, attn.n_rep
    q, k, v = _linear(x_q, attn.w_q), _linear(x_kv, attn.w_k), _linear(x_kv, attn.w_v)
    t_q, t_k = q.shape[0], k.shape[0]

    def split(m: torch.Tensor, t: int) -> torch.Tensor:
        return m.view(t, m.shape[1] // d_k, d_k).transpose(0, 1)  # (H or H_kv, t, d_k)

    qh, kh, vh = split(q, t_q), split(k, t_k), split(v, t_k)
    parts = {"Q": q, "K": k, "V": v, "Q heads": qh, "K heads": kh, "V heads": vh}
    if rotation is not None:  # turned before repeating: H_kv key heads, not H
        qh = parts["RoPE on Q"] = rotation(qh)  # (H, T, d_k)
        kh = parts["RoPE on K"] = rotation(kh)  # (H_kv, S, d_k)
    if n_rep > 1:  # query head h reads key/value head h // n_rep (HF's repeat_kv)
        kh = parts["K heads repeated"] = kh.repeat_interleave(n_rep, dim=0)  # (H, S, d_k)
        vh = parts["V heads repeated"] = vh.repeat_interleave(n_rep, dim=0)  # (H, S, d_k)
    # Q scaled before the product, as the model does (T·d_k numbers rather than T·T): QKᵀ/√d_k
    scores = (qh * d_k**-0.5) @ kh.transpose(-2, -1)  # (H, T, S)
    # nothing hidden: the same tensor; else -inf where hidden (the model adds an -inf bias)
    masked = scores if bool(allowed.all()) else scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(masked, dim=-1)  # (H, T, S)
    if not bool(allowed.any(-1).all()):  # a fully hidden row is NaN after softmax: 0, as the model
        weights = weights.masked_fill(~allowed, 0.0)
    context = weights @ vh  # (H, T, d_k)
    used = context if keep is None else HeadAblation(keep, mode)(context[None])[0]
    concat = used.transpose(0, 1).reshape(t_q, n_heads * d_k)  # (T, d_model)
    out = _linear(concat, attn.w_o)  # (T, d_model)
    parts.update(scores=scores, weights=weights, context=context, concat=concat, out=out)
    parts["masked scores"], parts["attention weights"] = masked, weights
    parts["attention output"] = out
    return parts


class _Steps:
    """The steps of one call, in order: each value moved to the CPU as float32."""

    def __init__(self, config) -> None:
        self.config = config
        self.llama = llama_style(config)
        self.steps: list[Step] = []

    def quote(self, name: str, place: str) -> tuple[str, str]:
        """Where the step's code is: LLaMA's line for a LLaMA-style layer, else a tutorial's."""
        if self.llama and name in LLAMA_LINES:
            return llama_line(name)
        return seed_line(name, place, self.config)

    def add(self, name, value, formula, shape, place, reads=(), note=None) -> None:
        seed, line = self.quote(name, place)
        en, zh = note or NOTES[name]
        value = value.detach().to("cpu", torch.float32)
        self.steps.append(Step(name, formula, shape, value, seed, line, en, zh, tuple(reads)))


def _detail(s: _Steps, parts: dict, block: dict) -> None:
    """The steps inside the attention the stack names, Q through W_O."""
    place, reader, kv, src = block["place"], block["reader"], block["kv"], block["src"]
    cross = block["kind"] == "cross"
    keys = "S" if cross else "T"
    kv_reads = () if cross else (src,)  # cross-attention's K and V read C, the encoder output
    attn = block["attn"]
    grouped = "K heads repeated" in parts
    kv_heads, kv_width = ("H_kv", "d_kv") if grouped else ("H", "d_model")
    s.add("Q", parts["Q"], f"Q = {reader} W_Q{_b(attn.w_q, 'Q')}", "[T, d_model]", place, (src,))
    for m in ("K", "V"):
        formula = f"{m} = {kv} W_{m}{_b(getattr(attn, f'w_{m.lower()}'), m)}"
        s.add(m, parts[m], formula, f"[{keys}, {kv_width}]", place, kv_reads)
    g = "g" if grouped else "h"  # a key/value head: g, shared by the query heads h of its group
    for m, t, h, i in (("Q", "T", "H", "h"), ("K", keys, kv_heads, g), ("V", keys, kv_heads, g)):
        formula = f"{m}_{i} = {m}.view({t}, {h}, d_k).transpose(0, 1)"
        s.add(f"{m} heads", parts[f"{m} heads"], formula, f"[{h}, {t}, d_k]", place, (m,))
    q_name, k_name, v_name = "Q heads", "K heads", "V heads"
    q_sym, k_sym = "Q_h", "K_h"
    if "RoPE on Q" in parts:
        turn = "{m} ⊙ cos(mθ) + rotate_half({m}) ⊙ sin(mθ)"
        positions = block["positions"]
        for m, h, i in (("Q", "H", "h"), ("K", kv_heads, g)):
            name = f"RoPE on {m}"
            formula = f"RoPE({m}_{i}) = {turn.format(m=f'{m}_{i}')}"
            note = NOTES[name] if positions else _OFF
            s.add(name, parts[name], formula, f"[{h}, {keys}, d_k]", place, (f"{m} heads",), note)
        q_name, k_name, q_sym, k_sym = "RoPE on Q", "RoPE on K", "RoPE(Q_h)", "RoPE(K_h)"
    if grouped:
        rep = attn.n_rep
        for m, was in (("K", k_name), ("V", v_name)):
            name = f"{m} heads repeated"
            shared = f"RoPE({m}_g)" if was.startswith("RoPE") else f"{m}_g"
            formula = f"{m}_h = {shared}, g = h // {rep}  (H / H_kv = {rep})"
            s.add(name, parts[name], formula, f"[H, {keys}, d_k]", place, (was,))
        k_name, v_name = "K heads repeated", "V heads repeated"
    scores = f"{q_sym} {k_sym}ᵀ / √d_k"
    s.add("scores", parts["scores"], scores, f"[H, T, {keys}]", place, (q_name, k_name))
    ok = block["allowed"]
    hidden, total = int((~ok).sum()), ok.numel()
    kind = "padding" if cross or block["home"] == "encoder" else "causal"
    seed = s.quote("masked scores", place)[0]
    note = _mask_note(kind, hidden, total, seed, None if cross else s.config.sliding_window)
    masked = f"{scores} + M  (M = 0 where allowed, -inf where hidden)"
    s.add(
        "masked scores", parts["masked scores"], masked, f"[H, T, {keys}]", place, ("scores",), note
    )
    weights = f"A_h = softmax({scores} + M)"
    s.add(
        "attention weights",
        parts["attention weights"],
        weights,
        f"[H, T, {keys}]",
        place,
        ("masked scores",),
    )
    s.add(
        "context",
        parts["context"],
        "head_h = A_h V_h",
        "[H, T, d_k]",
        place,
        ("attention weights", v_name),
    )
    concat, note = "Concat(head_1, …, head_H)", None
    keep = block["keep"]
    if keep is not None:
        concat = "Concat(m_1·head_1, …, m_H·head_H)"
        kept = ", ".join(f"{float(v):g}" for v in keep)
        how = "replaced by its mean over the tokens" if block["mode"] == "mean" else "zeroed"
        how_zh = "换成它在各 token 上的均值" if block["mode"] == "mean" else "置零"
        note = (
            NOTES["concat"][0] + f" Head mask m = [{kept}]: a removed head's context is {how}.",
            NOTES["concat"][1] + f" 头掩码 m = [{kept}]：被移除的头的结果{how_zh}。",
        )
    s.add("concat", parts["concat"], concat, "[T, d_model]", place, ("context",), note)
    s.add(
        "attention output",
        parts["attention output"],
        f"{block['mha']} = Concat(…) W_O{_b(attn.w_o, 'O')}",
        "[T, d_model]",
        place,
        ("concat",),
    )


_OFF = (
    "Positional encoding is switched off for this run: RoPE turns nothing, the heads pass "
    "unchanged.",
    "这次运行关闭了位置编码：RoPE 不旋转，各头原样通过。",
)
_GATED_HIDDEN = (
    "The gate through SiLU times the up features, one by one: the d_ff neurons W_down reads.",
    "门经过 SiLU 后与上投影的特征逐个相乘：W_down 读取的 d_ff 个神经元。",
)


def step_count(config, stack: str) -> int:
    """How many steps ``layer_steps`` returns for this config and stack, without computing them:
    input and output, the attention taken apart (12 steps from Q to W_O; 2 more for RoPE on Q
    and K, 2 more for grouped-query attention's repeated K and V heads) with its residual and
    its norm, a decoder layer's other attention (3 steps), the FFN (4; 2 more when gated)."""
    home = "decoder" if stack == "cross" else stack
    other = 3 if home == "decoder" and config.has_encoder else 0
    rope = 2 if config.positions == "rotary" and stack != "cross" else 0
    grouped = 2 if config.kv_heads < config.n_heads else 0
    gated = 2 if config.mlp == "gated" else 0
    return 1 + 14 + rope + grouped + other + 4 + gated + 1


def layer_steps(
    trace: Trace,
    stack: str = "encoder",
    layer: int = 0,
    item: int = 0,
    net: nn.Module | None = None,
) -> list[Step]:
    """Every step of one layer of one text, from its input to its output, in the layer's order.

    Args:
        trace: a Trace; the weights come from ``net``, else from the model that made the trace.
        stack: "encoder", "decoder" or "cross" (the decoder layer, its cross-attention taken
            apart; "decoder" takes its masked self-attention apart).
        layer, item: 0-based layer and batch item (the text).
        net: the model that made the trace, needed only when the trace no longer reaches it (a
            trace read back from a pickle).
    Returns:
        Steps named from STEP_NAMES, on the text's real tokens only (T = its real tokens; S = T,
        or the source's real tokens for cross-attention): "input" is
        ``trace.hidden_states[home][item, layer]``, "attention weights"
        ``trace.attentions[stack][item, layer]`` ([H, T, S]) and "output"
        ``trace.hidden_states[home][item, layer + 1]``, home being "decoder" for "cross".
    """
    check_stack(trace, stack)
    batch, n_layers = trace.attentions[stack].shape[:2]
    for what, value, size in (("layer", layer, n_layers), ("item", item, batch)):
        if not 0 <= value < size:
            raise ValueError(f"{what} {value} is out of range: this trace has {size} (0-based).")
    missing = unsupported(trace.config)
    if missing:
        raise ValueError(f"The layer's steps do not take apart {missing}.")
    layers, rotation_of = _layers(trace, stack, net)
    module = layers[layer]
    home = "decoder" if stack == "cross" else stack
    cfg = trace.config
    pre = cfg.norm == "pre"
    norm_name, ln = ("RMSNorm", "RMSNorm") if cfg.norm_kind == "rms" else ("LayerNorm", "LN")
    param = next(module.parameters())
    q_real = real_tokens(trace, stack)[0]
    rows = q_real[item].nonzero().squeeze(1).to(param.device)  # the text's real positions
    # RoPE turns the text's positions as the model did (0 … T−1 of the padded batch): the real
    # rows' own angles. Positions off: nothing turns (the step shows the heads unchanged).
    full = rotation_of(trace.hidden_states[home].shape[2], trace.positions)
    rotary = cfg.positions == "rotary"
    if full is not None:
        own = Rotation(full.cos.to(param.device)[rows], full.sin.to(param.device)[rows])
    elif rotary:
        own = Rotation(torch.tensor(1.0, dtype=param.dtype), torch.tensor(0.0, dtype=param.dtype))
    else:
        own = None

    def on(t: torch.Tensor) -> torch.Tensor:
        return t.to(device=param.device, dtype=param.dtype)

    blocks = [{"kind": "self", "attn": module.self_attn, "norm": module.add_norm1.norm}]
    if home == "decoder" and getattr(module, "cross_attn", None) is not None:
        blocks.append({"kind": "cross", "attn": module.cross_attn, "norm": module.add_norm2.norm})
    s = _Steps(cfg)
    dims = "[T, d_model]"
    with torch.no_grad():
        stream = on(trace.hidden_states[home][item, layer].to(param.device)[rows])  # (T, d_model)
        s.add("input", stream, "X", dims, home)
        sym, last = "X", "input"
        for number, block in enumerate(blocks, start=1):
            kind = block["kind"]
            place = "cross" if kind == "cross" else home
            detailed = (kind == "cross") == (stack == "cross")
            # the name of this attention's steps: "attention …" when taken apart, else its kind
            label = "attention" if detailed else f"{kind}-attention"
            mask_name, cols = home, rows
            if kind == "cross":
                mask_name = "cross"
                source = real_tokens(trace, "cross")[1][item]  # (T_src,) the real source tokens
                cols = source.nonzero().squeeze(1).to(param.device)
            allowed = trace.masks[mask_name][item].to(param.device)[rows][:, cols]  # (T, S)
            head_mask = trace.head_mask.get(mask_name)
            keep = None if head_mask is None else head_mask[layer]
            src, src_name, reader = stream, last, sym
            if pre:
                src = block["norm"](stream)
                src_name, reader = f"{norm_name} before {label}", f"{ln}({sym})"
                s.add(src_name, src, reader, dims, place, (last,))
            if kind == "cross":
                memory = on(trace.outputs["encoder"][item].to(param.device)[cols])  # (S, d_model)
                kv, kv_sym, mha = memory, "C", f"MultiHead({reader}, C, C)"
            else:
                kv, kv_sym = src, reader
                mha = ("Masked" if home == "decoder" else "") + f"MultiHead({reader})"
            turn = own if kind == "self" else None  # cross-attention is never turned
            parts = _attend(block["attn"], src, kv, allowed, keep, trace.ablation, turn)
            out_name = f"{label} output"
            if detailed:
                info = {"place": place, "reader": reader, "kv": kv_sym, "src": src_name}
                info.update(kind=kind, home=home, allowed=allowed, keep=keep, mode=trace.ablation)
                info.update(positions=full is not None)
                _detail(s, parts, info | {"mha": mha, "attn": block["attn"]})
            else:
                s.add(out_name, parts["attention output"], mha, dims, place, (src_name,))
            residual = stream + parts["attention output"]
            new = f"X{'₁₂'[number - 1]}"
            res_name = f"{label} residual"
            added = f"{new} = {sym} + {mha}" if pre else f"{sym} + {mha}"
            s.add(res_name, residual, added, dims, place, (last, out_name))
            if pre:
                stream, last = residual, res_name
            else:
                stream, last = block["norm"](residual), f"LayerNorm after {label}"
                s.add(last, stream, f"{new} = LayerNorm({sym} + {mha})", dims, place, (res_name,))
            sym = new
        ffn = module.ffn
        norm = (module.add_norm3 if home == "decoder" else module.add_norm2).norm
        src, src_name, reader = stream, last, sym
        if pre:
            src, src_name, reader = norm(stream), f"{norm_name} before FFN", f"{ln}({sym})"
            s.add(src_name, src, reader, dims, home, (last,))
        if cfg.mlp == "gated":
            out, _ = _gated(s, ffn, src, src_name, reader, home)
            formula = f"FFN({reader}) = (SiLU(G) ⊙ U) W_down{_b(ffn.w_down, 'down')}"
        else:
            inner = _ACT[cfg.activation].format(x=f"{reader} W_1{_b(ffn.fc1, '1')}")
            hidden = ffn.act(_linear(src, ffn.fc1))  # (T, d_ff)
            s.add("FFN hidden", hidden, inner, "[T, d_ff]", home, (src_name,))
            out = _linear(hidden, ffn.fc2)  # (T, d_model)
            formula = f"FFN({reader}) = {inner} W_2{_b(ffn.fc2, '2')}"
        s.add("FFN output", out, formula, dims, home, ("FFN hidden",))
        stream, added = stream + out, f"{sym} + FFN({reader})"
        s.add("FFN residual", stream, added, dims, home, (last, "FFN output"))
        last = "FFN residual"
        if not pre:
            stream, added = norm(stream), f"LayerNorm({added})"
            s.add("LayerNorm after FFN", stream, added, dims, home, (last,))
            last = "LayerNorm after FFN"
        s.add("output", stream, f"X_out = {added}", dims, home, (last,))
    return s.steps


def _gated(s: _Steps, ffn: nn.Module, src, src_name: str, reader: str, home: str):
    """The gated MLP's steps (gate, up, act(gate) ⊙ up); returns (W_down's output, hidden)."""
    act = _ACT[s.config.activation].format(x="G")
    gate = _linear(src, ffn.w_gate)  # (T, d_ff)
    s.add("FFN gate", gate, f"G = {reader} W_gate{_b(ffn.w_gate, 'gate')}", "[T, d_ff]", home,
          (src_name,))  # fmt: skip
    up = _linear(src, ffn.w_up)  # (T, d_ff)
    s.add("FFN up", up, f"U = {reader} W_up{_b(ffn.w_up, 'up')}", "[T, d_ff]", home, (src_name,))
    hidden = ffn.act(gate) * up  # (T, d_ff)
    s.add("FFN hidden", hidden, f"{act} ⊙ U", "[T, d_ff]", home, ("FFN gate", "FFN up"),
          _GATED_HIDDEN)  # fmt: skip
    return _linear(hidden, ffn.w_down), hidden  # (T, d_model), (T, d_ff)
