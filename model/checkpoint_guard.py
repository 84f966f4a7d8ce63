"""Judge a BERT checkpoint from config.json and the safetensors header before allocating anything.

Order (cheapest first, each refusal one sentence): config.json (a capped regular file, JSON, BERT,
the type and bounds of every size, the parameter and byte caps it implies); model.safetensors (a
capped regular file, header size, tensor count, dtypes, every key and shape against the config, the
caps again); the tokenizer files (regular, capped, no more tokens than embedding rows). Only then
does ``load_bert`` read tensors (converting them to float32) and build the model.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from lang import Msg
from model.checkpoint_files import (
    MB,
    SHOWN,
    BertLoadError,
    TensorEntry,
    count_lines,
    file_of,
    read_capped,
    read_header,
    read_json_object,
    regular_file,
    shown,
)

CONFIG, WEIGHTS = "config.json", "model.safetensors"
CONFIG_LIMIT = 1 * MB  # a BERT config.json is under 1 kB
DEFAULT_MAX_BYTES = 2 * 1024**3  # BERT-large is 1.34 GB in float32
DEFAULT_MAX_PARAMS = 400_000_000  # BERT-large has 335M
VOCAB_FILE_LIMIT = 16 * MB  # vocab.txt / tokenizer.json of a 1M-token vocabulary
SMALL_FILE_LIMIT = 1 * MB  # tokenizer_config.json, special_tokens_map.json, chat templates
# Files the tokenizer loader may open, and how large each may be.
TOKENIZER_LIMITS = {
    "vocab.txt": VOCAB_FILE_LIMIT,
    "tokenizer.json": VOCAB_FILE_LIMIT,
    "tokenizer_config.json": SMALL_FILE_LIMIT,
    "special_tokens_map.json": SMALL_FILE_LIMIT,
    "added_tokens.json": SMALL_FILE_LIMIT,
    "chat_template.jinja": SMALL_FILE_LIMIT,
    "chat_template.json": SMALL_FILE_LIMIT,
}
FLOAT_DTYPES = ("F32", "F16", "BF16", "F64")  # weights are converted to float32 after judging
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
# Sentences said in several places (lang.Msg patterns; ui/zh_CN_server.json has their Chinese).
NO_FILE = "{name} has no {file}."
UNKNOWN_WEIGHT = "{name} has a weight this BERT does not know: {key}."
MISSING_WEIGHTS = "{name} is missing {n} weights, e.g. {key}."
WRONG_SHAPE = "{name}: {key} has shape {shape} but its config implies {expected}."
WRONG_TOKENIZER = "give the tokenizer this checkpoint was trained with"
# Keys a BERT checkpoint may carry outside BertModel: task heads and a position-id buffer.
IGNORED_PREFIXES = ("cls.", "classifier.", "qa_outputs.", "embeddings.position_ids")


# ---- config.json ---------------------------------------------------------------------------------
def _whole_number(hf: dict, key: str, lowest: int, highest: int, default: int | None, what: str):
    if key not in hf and default is not None:
        return default
    if key not in hf:
        raise BertLoadError(Msg("{what} has no {key}.", what=what, key=repr(key)))
    value = hf[key]
    if not isinstance(value, int) or isinstance(value, bool) or not lowest <= value <= highest:
        raise BertLoadError(
            Msg(
                "{what} sets {key} to {value}; it must be a whole number from {lowest:,} to "
                "{highest:,}.",
                what=what,
                key=key,
                value=shown(value),
                lowest=lowest,
                highest=highest,
            )
        )
    return value


def _text(hf: dict, key: str, default: str, what: str) -> str:
    value = hf.get(key, default)
    if not isinstance(value, str):
        raise BertLoadError(
            Msg(
                "{what} sets {key} to {value}; it must be a string.",
                what=what,
                key=key,
                value=shown(value),
            )
        )
    return value


def check_config(hf: dict, name: str) -> dict[str, int]:
    """Judge a HF BERT config.json; returns its sizes (defaults filled in) or one sentence."""
    what = file_of(name, CONFIG)
    model_type = hf.get("model_type")
    if model_type != "bert":
        kind = model_type[:SHOWN] if isinstance(model_type, str) and model_type else Msg("unknown")
        raise BertLoadError(
            Msg(
                "{name} is a {kind} checkpoint; only BERT checkpoints (model_type 'bert') can be "
                "loaded.",
                name=name,
                kind=kind,
            )
        )
    positions = _text(hf, "position_embedding_type", "absolute", what)
    if positions != "absolute":
        raise BertLoadError(
            Msg(
                "{name} uses {kind} position embeddings; only absolute positions are implemented.",
                name=name,
                kind=shown(positions),
            )
        )
    for key in ("is_decoder", "add_cross_attention"):
        if not isinstance(hf.get(key, False), bool):
            raise BertLoadError(
                Msg(
                    "{what} sets {key} to {value}; it must be true or false.",
                    what=what,
                    key=key,
                    value=shown(hf[key]),
                )
            )
        if hf.get(key):
            raise BertLoadError(
                Msg("{name} is a BERT decoder; only BERT encoders can be loaded.", name=name)
            )
    act = _text(hf, "hidden_act", "gelu", what)
    if act not in ACTIVATIONS:
        raise BertLoadError(
            Msg(
                "{name} uses the activation {act}, which is not implemented (only {known}).",
                name=name,
                act=shown(act),
                known=", ".join(ACTIVATIONS),
            )
        )
    sizes = {key: _whole_number(hf, key, *bounds, what) for key, bounds in SIZES.items()}
    if sizes["hidden_size"] % sizes["num_attention_heads"]:
        raise BertLoadError(
            Msg(
                "{what} has hidden_size {width}, which does not split into {heads} attention "
                "heads of equal width.",
                what=what,
                width=sizes["hidden_size"],
                heads=sizes["num_attention_heads"],
            )
        )
    eps = hf.get("layer_norm_eps", 1e-12)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
        raise BertLoadError(
            Msg(
                "{what} sets layer_norm_eps to {value}; it must be a number between 0 and 1.",
                what=what,
                value=shown(eps),
            )
        )
    pad = hf.get("pad_token_id")
    if pad is not None:
        _whole_number(hf, "pad_token_id", 0, sizes["vocab_size"] - 1, None, what)
    return sizes


def bert_shapes(sizes: dict[str, int], pooler: bool) -> dict[str, tuple[int, ...]]:
    """Every BertModel weight name (HF's) and the shape its config implies."""
    d, d_ff = sizes["hidden_size"], sizes["intermediate_size"]
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (sizes["vocab_size"], d),
        "embeddings.position_embeddings.weight": (sizes["max_position_embeddings"], d),
        "embeddings.token_type_embeddings.weight": (sizes["type_vocab_size"], d),
        "embeddings.LayerNorm.weight": (d,),
        "embeddings.LayerNorm.bias": (d,),
    }
    per_layer = {  # (out, in) of each Linear; LayerNorms have (d,)
        "attention.self.query": (d, d),
        "attention.self.key": (d, d),
        "attention.self.value": (d, d),
        "attention.output.dense": (d, d),
        "attention.output.LayerNorm": (d,),
        "intermediate.dense": (d_ff, d),
        "output.dense": (d, d_ff),
        "output.LayerNorm": (d,),
    }
    for i in range(sizes["num_hidden_layers"]):
        for module, shape in per_layer.items():
            shapes[f"encoder.layer.{i}.{module}.weight"] = shape
            shapes[f"encoder.layer.{i}.{module}.bias"] = shape[:1]
    if pooler:
        shapes["pooler.dense.weight"] = (d, d)
        shapes["pooler.dense.bias"] = (d,)
    return shapes


def config_params(sizes: dict[str, int]) -> int:
    """Parameters a config implies, counting a pooler (the most a checkpoint of it can hold)."""
    return sum(math.prod(shape) for shape in bert_shapes(sizes, pooler=True).values())


def check_budget(n_params: int, name: str, max_params: int, max_bytes: int) -> None:
    """Refuse a model over the parameter cap or whose float32 weights exceed the byte cap."""
    if n_params > max_params:
        raise BertLoadError(
            Msg(
                "{name} has {n:,.0f}M parameters; the limit is {limit:,.0f}M (BERT-large has "
                "335M).",
                name=name,
                n=n_params / 1e6,
                limit=max_params / 1e6,
            )
        )
    if 4 * n_params > max_bytes:
        raise BertLoadError(
            Msg(
                "{name} needs {gb:,.2f} GB in float32; the limit is {limit:,.2f} GB.",
                name=name,
                gb=4 * n_params / 1e9,
                limit=max_bytes / 1e9,
            )
        )


def normalize_key(key: str) -> str:
    """HF's BertModel name of a checkpoint key: no 'bert.' prefix, TF-era gamma/beta renamed."""
    key = key.removeprefix("bert.")
    return key.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias"
    )


def check_weights(
    header: dict[str, TensorEntry],
    sizes: dict[str, int],
    name: str,
    max_params: int,
    max_bytes: int,
) -> tuple[bool, list[str]]:
    """(has a pooler, header keys to load) once every key, dtype and shape fits the config."""
    pooler = any(normalize_key(k).startswith("pooler.") for k in header)
    expected = bert_shapes(sizes, pooler)
    found: dict[str, str] = {}  # HF name -> key in the file
    for key, entry in header.items():
        hf_key = normalize_key(key)
        if hf_key.startswith(IGNORED_PREFIXES):
            continue
        if hf_key not in expected:
            raise BertLoadError(Msg(UNKNOWN_WEIGHT, name=name, key=shown(key)))
        if hf_key in found:
            raise BertLoadError(
                Msg(
                    "{name} holds {key} twice (with and without 'bert.').",
                    name=name,
                    key=shown(hf_key),
                )
            )
        found[hf_key] = key
        if entry.dtype not in FLOAT_DTYPES:
            raise BertLoadError(
                Msg(
                    "{name}: {key} is stored as {dtype}; only float32, float16, bfloat16 and "
                    "float64 weights can be loaded (convert the file first).",
                    name=name,
                    key=key,
                    dtype=entry.dtype,
                )
            )
        if entry.shape != expected[hf_key]:
            raise BertLoadError(
                Msg(
                    WRONG_SHAPE,
                    name=name,
                    key=hf_key,
                    shape=str(entry.shape),
                    expected=str(expected[hf_key]),
                )
            )
    missing = [k for k in expected if k not in found]
    if missing:
        raise BertLoadError(Msg(MISSING_WEIGHTS, name=name, n=len(missing), key=repr(missing[0])))
    check_budget(sum(math.prod(shape) for shape in expected.values()), name, max_params, max_bytes)
    return pooler, list(found.values())


# ---- tokenizer files ---------------------------------------------------------------------------
# Keys of "key": number pairs in tokenizer.json that are not token ids.
NOT_IDS = {b"max_length", b"stride", b"Fixed", b"pad_id", b"pad_type_id", b"type_id"}
NOT_IDS |= {b"pad_to_multiple_of", b"max_input_chars_per_word"}


def _numbers_from(v: int) -> bytes:
    """A regular expression for the decimal numbers >= v: more digits, or as many and larger."""
    digits = str(v)
    larger = [rf"\d{{{len(digits) + 1},}}", digits]
    for i, d in enumerate(digits):
        if d != "9":
            larger.append(rf"{digits[:i]}[{int(d) + 1}-9]\d{{{len(digits) - i - 1}}}")
    return "|".join(larger).encode()


def check_tokenizer_json(path: Path, what: str, vocab_size: int) -> None:
    """Refuse a tokenizer.json with more tokens or higher ids than the embedding table has rows."""
    # A scan, not a JSON parse: loading a 640k-token file takes 325 MiB and 7 s. The regular
    # expression finds only '"key": id' pairs with id >= vocab_size, in C, so a 16 MB file takes
    # tens of milliseconds. Ids inside lists (the post-processor's) are checked after loading.
    data = read_capped(path, what, VOCAB_FILE_LIMIT)
    if data.count(b":") > 2 * vocab_size + 1024:  # each token once, maybe again if added
        raise BertLoadError(
            Msg(
                "{what} lists far more tokens than the {n:,} rows of its embedding table "
                "(vocab_size); {advice}.",
                what=what,
                n=vocab_size,
                advice=Msg(WRONG_TOKENIZER),
            )
        )
    past = re.compile(rb'"\s*:\s*(' + _numbers_from(vocab_size) + rb")(?!\d)")
    for match in past.finditer(data):
        key = data[data.rfind(b'"', 0, match.start()) + 1 : match.start()]
        if key not in NOT_IDS:
            digits = match[1]
            token_id = f"{int(digits):,}" if len(digits) <= 12 else digits[:12].decode() + "…"
            raise BertLoadError(
                Msg(
                    "{what} gives {token} the id {id}, past the {n:,} rows of its embedding table "
                    "(vocab_size); {advice}.",
                    what=what,
                    token=shown(key.decode("utf-8", "replace")),
                    id=token_id,
                    n=vocab_size,
                    advice=Msg(WRONG_TOKENIZER),
                )
            )


def check_tokenizer_files(folder: Path, name: str, vocab_size: int) -> None:
    """Every file the tokenizer loader may open is regular and capped; vocab.txt fits the table."""
    present = {}
    for file, limit in TOKENIZER_LIMITS.items():
        present[file] = regular_file(folder / file, file_of(name, file), limit) is not None
    if (folder / "additional_chat_templates").exists():
        raise BertLoadError(
            Msg(
                "{name} has an additional_chat_templates folder; a BERT needs none, so remove it.",
                name=name,
            )
        )
    if not (present["vocab.txt"] or present["tokenizer.json"]):
        raise BertLoadError(
            Msg("{name} has no vocab.txt or tokenizer.json for its tokenizer.", name=name)
        )
    if present["vocab.txt"]:
        what = file_of(name, "vocab.txt")
        n = count_lines(folder / "vocab.txt", what, stop_after=vocab_size)
        if n > vocab_size:
            raise BertLoadError(
                Msg(
                    "{what} has more than {n:,} tokens, the rows of its embedding table "
                    "(vocab_size); give the vocab.txt this checkpoint was trained with.",
                    what=what,
                    n=vocab_size,
                )
            )
    if present["tokenizer.json"]:
        check_tokenizer_json(folder / "tokenizer.json", file_of(name, "tokenizer.json"), vocab_size)
    for file in ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"):
        if present[file]:
            read_json_object(folder / file, file_of(name, file), SMALL_FILE_LIMIT)


def check_tokenizer_ids(vocab: dict[str, int], name: str, vocab_size: int) -> None:
    """Refuse a loaded tokenizer whose ids reach past the embedding table (every run would fail)."""
    top = max(vocab.values(), default=-1)
    if top >= vocab_size:
        raise BertLoadError(
            Msg(
                "{name}'s tokenizer has ids up to {top:,} but its embedding table has {n:,} rows "
                "(vocab_size); {advice}.",
                name=name,
                top=top,
                n=vocab_size,
                advice=Msg(WRONG_TOKENIZER),
            )
        )


# ---- the whole judgment --------------------------------------------------------------------------
def judge_checkpoint(
    folder: Path,
    name: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_params: int = DEFAULT_MAX_PARAMS,
) -> tuple[dict, bool, list[str]]:
    """(config.json, has a pooler, weight keys) of a loadable checkpoint; else one sentence."""
    config_path = folder / CONFIG
    if regular_file(config_path, file_of(name, CONFIG), CONFIG_LIMIT) is None:
        raise BertLoadError(Msg(NO_FILE, name=name, file=CONFIG))
    hf = read_json_object(config_path, file_of(name, CONFIG), CONFIG_LIMIT)
    sizes = check_config(hf, name)
    check_budget(config_params(sizes), name, max_params, max_bytes)
    weights = folder / WEIGHTS
    if regular_file(weights, file_of(name, WEIGHTS), max_bytes) is None:
        found = sorted(p.name for p in folder.glob("*.bin")) + sorted(
            p.name for p in folder.glob("*.pt")
        )
        hint = (
            Msg(" (found {files}: pickled weights are never loaded)", files=", ".join(found))
            if found
            else ""
        )
        raise BertLoadError(
            Msg(
                "{name} has no {file}; only safetensors weights are loaded{hint}.",
                name=name,
                file=WEIGHTS,
                hint=hint,
            )
        )
    header = read_header(weights, file_of(name, WEIGHTS), max_bytes)
    pooler, keys = check_weights(header, sizes, name, max_params, max_bytes)
    check_tokenizer_files(folder, name, sizes["vocab_size"])
    return hf, pooler, keys
