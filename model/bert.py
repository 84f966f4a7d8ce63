"""BERT as a checkpoint family: its config.json judged and read, its weight table, its tokenizer.

A checkpoint of BertModel (or a BertFor* task model: its head is left out), post-norm, learned
absolute positions, token types, an optional pooler. The pipeline (model/checkpoint.py) reads this
table; nothing here touches a file.
"""

from __future__ import annotations

import re
from pathlib import Path

from lang import Msg
from model.checkpoint_files import MB, file_of, shown
from model.config import TransformerConfig
from model.config_values import (
    CONFIG,
    activation,
    flag,
    model_type_of,
    number,
    text,
    whole_number,
)
from model.family import Family, Source, TokenizerFiles
from model.load_errors import ConfigRefused

VOCAB_FILE_LIMIT = 64 * MB  # a tokenizer.json: Gemma 3's (262,144 tokens with merges) is 33 MB
SMALL_FILE_LIMIT = 1 * MB  # tokenizer_config.json, special_tokens_map.json, chat templates
# HF hidden_act -> our activation.
ACTIVATIONS = {
    "gelu": "gelu",
    "relu": "relu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
}
# config.json size key -> (lowest, highest, default; None = required). The highest values are far
# above any published BERT (BERT-large: 24 layers, 1024 wide, 16 heads, 4096 FFN, 512 positions)
# yet each alone cannot exhaust memory; the parameter cap bounds their product.
SIZES = {
    "vocab_size": (1, 1_000_000, None),
    "hidden_size": (1, 8192, None),
    "num_attention_heads": (1, 256, None),
    "num_hidden_layers": (1, 128, None),
    "intermediate_size": (1, 65536, None),
    "max_position_embeddings": (1, 8192, 512),
    "type_vocab_size": (1, 1024, 2),
}


# ---- config.json ---------------------------------------------------------------------------------
def check_config(hf: dict, name: str) -> dict[str, int]:
    """Judge a HF BERT config.json; returns its sizes (defaults filled in) or one sentence."""
    what = file_of(name, CONFIG)
    model_type_of(hf, name, ("bert",), "BERT")
    positions = text(hf, "position_embedding_type", "absolute", what)
    if positions != "absolute":
        raise ConfigRefused(
            Msg(
                "{name} uses {kind} position embeddings; only absolute positions are implemented.",
                name=name,
                kind=shown(positions),
            )
        )
    for key in ("is_decoder", "add_cross_attention"):
        if flag(hf, key, False, what):
            raise ConfigRefused(
                Msg("{name} is a BERT decoder; only BERT encoders can be loaded.", name=name)
            )
    activation(hf, "hidden_act", "gelu", ACTIVATIONS, name)
    sizes = {key: whole_number(hf, key, *bounds, what) for key, bounds in SIZES.items()}
    if sizes["hidden_size"] % sizes["num_attention_heads"]:
        raise ConfigRefused(
            Msg(
                "{what} has hidden_size {width}, which does not split into {heads} attention "
                "heads of equal width.",
                what=what,
                width=sizes["hidden_size"],
                heads=sizes["num_attention_heads"],
            )
        )
    number(hf, "layer_norm_eps", 1e-12, 0, 1, what)
    if hf.get("pad_token_id") is not None:
        whole_number(hf, "pad_token_id", 0, sizes["vocab_size"] - 1, None, what)
    return sizes


def bert_config(hf: dict, name: str, pooler: bool = True) -> TransformerConfig:
    """Our config from a HF BERT config.json; refuses anything BertModel would not be."""
    sizes = check_config(hf, name)  # types and bounds first: TransformerConfig trusts them
    try:
        return TransformerConfig(
            name=name,
            arch="encoder",
            vocab_size=sizes["vocab_size"],
            d_model=sizes["hidden_size"],
            n_heads=sizes["num_attention_heads"],
            n_layers=sizes["num_hidden_layers"],
            d_ff=sizes["intermediate_size"],
            max_len=sizes["max_position_embeddings"],
            norm="post",
            activation=activation(hf, "hidden_act", "gelu", ACTIVATIONS, name),
            positions="learned",
            type_vocab_size=sizes["type_vocab_size"],
            embedding_norm=True,
            layer_norm_eps=float(hf.get("layer_norm_eps", 1e-12)),
            dropout=0.0,
            pooler=pooler,
            pad_id=hf.get("pad_token_id") or 0,
            source=f"BERT checkpoint {name}",
        )
    except ValueError as exc:
        raise ConfigRefused(
            Msg("{what} is not usable: {reason}", what=file_of(name, CONFIG), reason=str(exc))
        ) from None


# ---- the weights ---------------------------------------------------------------------------------
# Our name -> HF BertModel's (no "bert." prefix). Each linear and LayerNorm has a weight and a bias.
TOP = {
    "embedding.tok_emb.weight": Source("embeddings.word_embeddings.weight"),
    "embedding.pos_emb.weight": Source("embeddings.position_embeddings.weight"),
    "embedding.type_emb.weight": Source("embeddings.token_type_embeddings.weight"),
    "embedding.norm.weight": Source("embeddings.LayerNorm.weight"),
    "embedding.norm.bias": Source("embeddings.LayerNorm.bias"),
    "pooler.dense.weight": Source("pooler.dense.weight"),
    "pooler.dense.bias": Source("pooler.dense.bias"),
}
LAYER_MODULES = {  # ours -> HF's, inside layer i
    "self_attn.w_q": "attention.self.query",
    "self_attn.w_k": "attention.self.key",
    "self_attn.w_v": "attention.self.value",
    "self_attn.w_o": "attention.output.dense",
    "add_norm1.norm": "attention.output.LayerNorm",
    "ffn.fc1": "intermediate.dense",
    "ffn.fc2": "output.dense",
    "add_norm2.norm": "output.LayerNorm",
}
LAYER = {
    f"{ours}.{p}": Source(f"{hf}.{p}")
    for ours, hf in LAYER_MODULES.items()
    for p in ("weight", "bias")
}
# Names a BERT checkpoint may carry outside BertModel: task heads and a position-id buffer.
NOT_WEIGHTS = re.compile(r"^(cls\.|classifier\.|qa_outputs\.|embeddings\.position_ids)")


def hf_name(key: str) -> str:
    """HF's BertModel name of a checkpoint key: no 'bert.' prefix, TF-era gamma/beta renamed."""
    key = key.removeprefix("bert.")
    return key.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias"
    )


def with_pooler(config: TransformerConfig, names: set[str]) -> TransformerConfig:
    """The config with a pooler when the file has one (BertModel's; task models may not)."""
    return config.replace(pooler=any(n.startswith("pooler.") for n in names))


# ---- the tokenizer -------------------------------------------------------------------------------
def load_wordpiece(folder: Path):
    """BERT's WordPiece tokenizer from the judged folder's files."""
    from transformers import BertTokenizerFast

    return BertTokenizerFast.from_pretrained(str(folder), local_files_only=True)


TOKENIZER = TokenizerFiles(
    limits={
        "vocab.txt": VOCAB_FILE_LIMIT,
        "tokenizer.json": VOCAB_FILE_LIMIT,
        "tokenizer_config.json": SMALL_FILE_LIMIT,
        "special_tokens_map.json": SMALL_FILE_LIMIT,
        "added_tokens.json": SMALL_FILE_LIMIT,
        "chat_template.jinja": SMALL_FILE_LIMIT,
        "chat_template.json": SMALL_FILE_LIMIT,
    },
    needs=(("vocab.txt",), ("tokenizer.json",)),
    needs_said=Msg("vocab.txt or tokenizer.json"),
    load=load_wordpiece,
    counted_lines="vocab.txt",
)
BERT = Family(
    name="BERT",
    read_config=bert_config,
    top=TOP,
    layer=LAYER,
    our_layer="encoder.layers.",
    hf_layer="encoder.layer.",
    hf_name=hf_name,
    not_weights=NOT_WEIGHTS,
    tokenizer=TOKENIZER,
    fit=with_pooler,
)
