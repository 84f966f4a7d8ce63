"""Judge a checkpoint's tokenizer files before the tokenizer loader opens them, then load it.

Every file the family's loader may open is a capped regular file; a one-token-a-line vocabulary
(vocab.txt) and tokenizer.json have no more tokens, and no higher ids, than the embedding table
has rows, so every run of the model can look its ids up. The loaded tokenizer's ids are checked
again (added special tokens show only there).
"""

from __future__ import annotations

import re
from pathlib import Path

from lang import Msg
from model.checkpoint_files import (
    count_lines,
    file_of,
    read_capped,
    read_json_object,
    regular_file,
    shown,
)
from model.config import TransformerConfig
from model.family import Family, TokenizerFiles
from model.load_errors import TokenizerRefused

WRONG_TOKENIZER = "give the tokenizer this checkpoint was trained with"
JSON_FILES = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
MAX_CHAT_TEMPLATES = 64  # files in additional_chat_templates/
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


def check_tokenizer_json(path: Path, what: str, vocab_size: int, limit: int) -> None:
    """Refuse a tokenizer.json with more tokens or higher ids than the embedding table has rows."""
    # A scan, not a JSON parse: loading a 640k-token file takes 325 MiB and 7 s. The regular
    # expression finds only '"key": id' pairs with id >= vocab_size, in C, so a 16 MB file takes
    # tens of milliseconds. Ids inside lists (the post-processor's) are checked after loading.
    data = read_capped(path, what, limit)
    if data.count(b":") > 2 * vocab_size + 1024:  # each token once, maybe again if added
        raise TokenizerRefused(
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
            raise TokenizerRefused(
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


def check_tokenizer_files(folder: Path, name: str, spec: TokenizerFiles, vocab_size: int) -> None:
    """Every file the tokenizer loader may open is regular and capped; the vocabulary fits."""
    present = {
        file: regular_file(folder / file, file_of(name, file), limit) is not None
        for file, limit in spec.limits.items()
    }
    _check_chat_templates(folder, name, spec)
    if not any(all(present[file] for file in group) for group in spec.needs):
        raise TokenizerRefused(
            Msg("{name} has no {files} for its tokenizer.", name=name, files=spec.needs_said)
        )
    counted = spec.counted_lines
    if counted is not None and present[counted]:
        what = file_of(name, counted)
        if count_lines(folder / counted, what, stop_after=vocab_size) > vocab_size:
            raise TokenizerRefused(
                Msg(
                    "{what} has more than {n:,} tokens, the rows of its embedding table "
                    "(vocab_size); give the {file} this checkpoint was trained with.",
                    what=what,
                    n=vocab_size,
                    file=counted,
                )
            )
    if present.get("tokenizer.json"):
        path, limit = folder / "tokenizer.json", spec.limits["tokenizer.json"]
        check_tokenizer_json(path, file_of(name, "tokenizer.json"), vocab_size, limit)
    for file in JSON_FILES:
        if present.get(file):
            read_json_object(folder / file, file_of(name, file), spec.limits[file])


def _check_chat_templates(folder: Path, name: str, spec: TokenizerFiles) -> None:
    """additional_chat_templates/: refused where the family has none, else capped files."""
    templates = folder / "additional_chat_templates"
    if not spec.chat_templates:
        if templates.exists():
            raise TokenizerRefused(
                Msg(
                    "{name} has an additional_chat_templates folder; a BERT needs none, so remove "
                    "it.",
                    name=name,
                )
            )
        return
    if not templates.is_dir():
        return
    found = list(templates.iterdir())[: MAX_CHAT_TEMPLATES + 1]
    if len(found) > MAX_CHAT_TEMPLATES:
        raise TokenizerRefused(
            Msg("{name} has more than {n} chat templates.", name=name, n=MAX_CHAT_TEMPLATES)
        )
    small = spec.limits["chat_template.json"]
    for path in found:
        regular_file(path, file_of(name, f"{templates.name}/{path.name}"), small)


def check_tokenizer_ids(vocab: dict[str, int], name: str, vocab_size: int) -> None:
    """Refuse a loaded tokenizer whose ids reach past the embedding table (every run would fail)."""
    top = max(vocab.values(), default=-1)
    if top >= vocab_size:
        raise TokenizerRefused(
            Msg(
                "{name}'s tokenizer has ids up to {top:,} but its embedding table has {n:,} rows "
                "(vocab_size); {advice}.",
                name=name,
                top=top,
                n=vocab_size,
                advice=Msg(WRONG_TOKENIZER),
            )
        )


def load_tokenizer(folder: Path, name: str, family: Family, config: TransformerConfig):
    """The family's tokenizer from the judged folder, its ids checked against the table; one
    that has no padding token pads with its end-of-text token (GPT-2)."""
    try:
        tok = family.tokenizer.load(folder)
    except Exception as exc:
        raise TokenizerRefused(
            Msg(
                "{name}'s tokenizer could not be loaded ({kind}: {detail}).",
                name=name,
                kind=type(exc).__name__,
                detail=shown(str(exc), 120),
            )
        ) from None
    check_tokenizer_ids(tok.get_vocab(), name, config.vocab_size)
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    tok.model_max_length = min(tok.model_max_length, config.max_len)
    return tok
