"""GPT-2, the LLaMA family (LLaMA, Qwen2, Qwen3, Mistral) and Gemma 3 as checkpoint families.

Our names on the left, HF's on the right (inside layer i). GPT-2 stores its linears as Conv1D,
weight [in, out] (transposed into nn.Linear's [out, in]), and W_Q, W_K, W_V fused in one c_attn
[d, 3d] (split along its output in that order). The LLaMA family stores nn.Linear as we do.
Their config.json is read by model/lm_config.py; the pipeline (model/checkpoint.py) reads these.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from lang import Msg
from model.bert import SMALL_FILE_LIMIT, VOCAB_FILE_LIMIT
from model.family import Family, Source, TokenizerFiles
from model.lm_config import lm_config

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
QK_NORMS = {  # Qwen3's and Gemma 3's RMSNorm over each query and key head
    "self_attn.q_norm.weight": Source("self_attn.q_norm.weight"),
    "self_attn.k_norm.weight": Source("self_attn.k_norm.weight"),
}
LLAMA_LAYER = {
    "add_norm1.norm.weight": Source("input_layernorm.weight"),
    "add_norm3.norm.weight": Source("post_attention_layernorm.weight"),
    **{
        f"{ours}.{p}": Source(f"{hf}.{p}")
        for ours, hf in LLAMA_LINEARS.items()
        for p in ("weight", "bias")
    },
    **QK_NORMS,
}
# Gemma 3 names its four norms by place: HF's post_attention_layernorm is the attention's
# second norm here (before the residual add), not the MLP's first as in LLaMA.
GEMMA3_LAYER = {
    **LLAMA_LAYER,
    "add_norm1.post.weight": Source("post_attention_layernorm.weight"),
    "add_norm3.norm.weight": Source("pre_feedforward_layernorm.weight"),
    "add_norm3.post.weight": Source("post_feedforward_layernorm.weight"),
}


def load_auto(folder: Path):
    """AutoTokenizer from the judged folder: local files only, never remote code."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        str(folder), local_files_only=True, trust_remote_code=False
    )


TOKENIZER = TokenizerFiles(
    limits={
        "tokenizer.json": VOCAB_FILE_LIMIT,
        "vocab.json": VOCAB_FILE_LIMIT,  # GPT-2's BPE vocabulary
        "merges.txt": VOCAB_FILE_LIMIT,  # and its merges
        "tokenizer.model": VOCAB_FILE_LIMIT,  # SentencePiece (LLaMA 1/2, Mistral)
        "tokenizer_config.json": SMALL_FILE_LIMIT,
        "special_tokens_map.json": SMALL_FILE_LIMIT,
        "added_tokens.json": SMALL_FILE_LIMIT,
        "chat_template.jinja": SMALL_FILE_LIMIT,
        "chat_template.json": SMALL_FILE_LIMIT,
    },
    needs=(("tokenizer.json",), ("vocab.json", "merges.txt"), ("tokenizer.model",)),
    needs_said=Msg("tokenizer.json, vocab.json and merges.txt, or tokenizer.model"),
    load=load_auto,
    chat_templates=True,
)
GPT2 = Family(
    name="GPT-2",
    read_config=lm_config,
    top=GPT2_TOP,
    layer=GPT2_LAYER,
    our_layer="decoder.layers.",
    hf_layer="h.",
    hf_name=lambda key: key.removeprefix("transformer."),  # GPT2LMHeadModel's; GPT2Model: none
    not_weights=re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$"),  # causal-mask buffers
    tokenizer=TOKENIZER,
    reads_bin=True,
    pad_from_tokenizer=True,
)
LLAMA = Family(
    name="LLaMA",
    read_config=lm_config,
    top=LLAMA_TOP,
    layer=LLAMA_LAYER,
    our_layer="decoder.layers.",
    hf_layer="layers.",
    hf_name=lambda key: key.removeprefix("model."),  # LlamaForCausalLM's; LlamaModel: none
    not_weights=re.compile(r"^layers\.\d+\.self_attn\.rotary_emb\.inv_freq$"),  # computed
    tokenizer=TOKENIZER,
    reads_bin=True,
    pad_from_tokenizer=True,
)
GEMMA3 = replace(LLAMA, name="Gemma 3", layer=GEMMA3_LAYER)  # Gemma3ForCausalLM's: "model."
# config.json's model_type -> the family whose tables read it.
LM_FAMILIES = {
    "gpt2": GPT2,
    "llama": LLAMA,
    "qwen2": LLAMA,
    "mistral": LLAMA,
    "qwen3": LLAMA,
    "gemma3_text": GEMMA3,
}
