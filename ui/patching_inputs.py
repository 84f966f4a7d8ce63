"""Which heads matter's inputs, checked: the corrupt text, the answer and wrong tokens and the
position read, each refused (or warned about) in one sentence a person reads at a glance — a
text too long says how long, token lists are an excerpt and a count, and what the model reads
as its unknown token ([UNK]) is named."""

from __future__ import annotations

import re

from engine import InputError, encode, kind_of, named, text_ids, unknown_parts
from lang import Msg
from model.pieces import BYTES
from viz.common import display_token

PATCH_TOKENS = 64  # the longest text patched: (L·H + L·T) patched runs of T tokens each
READ_CHARS = 1_000  # a longer corrupt text is refused before it is read: far past 64 tokens
SHOWN = 12  # a token list in a sentence: all of a short text, else its start and its end
BYTE_PIECE = re.compile(r"‹((?:\\x[0-9A-F]{2})+)›")  # "‹\xEC›": bytes that are no character
PAST_THE_TABLE = re.compile(r"‹(\d+)›")  # an output id past the tokenizer's table
BYTE_CHARS = {b: ch for ch, b in BYTES.items()}  # byte -> its byte-level BPE character


def excerpt(tokens: list[str]) -> str:
    """A text's tokens for a sentence: all of them when few, else the first and last few."""
    shown = [display_token(t) for t in tokens]
    if len(shown) <= SHOWN:
        return " ".join(shown)
    return " ".join(shown[:8]) + " … " + " ".join(shown[-3:])


def corrupt_inputs(loaded, clean: dict, text: str) -> dict:
    """The corrupt text's inputs beside the clean ones (an encoder-decoder's target shared)."""
    if not text.strip():
        raise InputError(
            Msg(
                "Write the corrupt text first: the page's text with a word or two changed "
                "(the same number of tokens), or pick a shipped pair."
            )
        )
    if len(text) > READ_CHARS:
        raise InputError(
            Msg(
                "The corrupt text is {n:,} characters long and was not read: patching reads "
                "texts of up to {limit} tokens, as many as the page's text ({clean}); write "
                "the page's text with a word or two changed.",
                n=len(text),
                limit=PATCH_TOKENS,
                clean=clean["input_ids"].shape[1],
            )
        )
    n = len(text_ids(loaded, text, loaded.net.config.arch == "decoder"))  # uncut: its length
    if n > min(PATCH_TOKENS, loaded.net.config.max_len):
        raise InputError(
            Msg(
                "The corrupt text is {n} tokens long; patching reads texts of up to {limit}, "
                "as many as the page's text ({clean}): write the page's text with a word or "
                "two changed.",
                n=n,
                limit=min(PATCH_TOKENS, loaded.net.config.max_len),
                clean=clean["input_ids"].shape[1],
            )
        )
    inputs = encode(loaded.net, text, tokenizer=loaded.tokenizer)  # as the page reads a text
    for key in ("tgt_ids", "tgt_attention_mask"):
        if key in clean:
            inputs[key] = clean[key]
    return inputs


def tokens_of(loaded, inputs: dict) -> list[str]:
    return list(loaded.tokenizer.convert_ids_to_tokens(inputs["input_ids"][0].tolist()))


def check_lengths(loaded, clean: dict, corrupt: dict) -> None:
    """Refuse a text too long to patch, or a pair of different lengths (both texts shown)."""
    a, b = clean["input_ids"].shape[1], corrupt["input_ids"].shape[1]
    if a > PATCH_TOKENS:
        raise InputError(
            Msg(
                "The text has {n} tokens; patching reads texts of up to {limit} (every head "
                "and position is one more forward pass): shorten it.",
                n=a,
                limit=PATCH_TOKENS,
            )
        )
    if a != b:
        raise InputError(
            Msg(
                "The two texts must have the same number of tokens to patch one into the other: "
                "the clean text has {clean} ({clean_tokens}), the corrupt text {corrupt} "
                "({corrupt_tokens}). Change words for words of as many tokens.",
                clean=a,
                corrupt=b,
                clean_tokens=excerpt(tokens_of(loaded, clean)),
                corrupt_tokens=excerpt(tokens_of(loaded, corrupt)),
            )
        )


def unknown_of(loaded, *texts: str) -> tuple[list[str], int]:
    """What the model reads as [UNK] in any of the texts, and how many tokens they hold."""
    parts, total = [], 0
    for text in texts:
        found, n = unknown_parts(loaded.tokenizer, kind_of(loaded), text)
        parts += found
        total += n
    return parts, total


def check_readable(loaded, clean_text: str, corrupt_text: str, clean: dict, corrupt: dict):
    """Refuse a pair the model reads as one text: they differ only where it reads [UNK]."""
    if clean_text == corrupt_text:
        return
    if clean["input_ids"].tolist() != corrupt["input_ids"].tolist():
        return
    parts, _ = unknown_of(loaded, clean_text, corrupt_text)
    if parts:
        raise InputError(
            Msg(
                "The two texts read the same to this model: it has no token for {parts} (each "
                "is [UNK]); pick a model that reads them, or change other words.",
                parts=named(parts),
            )
        )


def unknown_note(loaded, clean_text: str, corrupt_text: str) -> str:
    """A warning for a measured pair with any [UNK] in it (Which heads matter, How the heads
    connect): it names what the model cannot read, and says the measure may be wrong."""
    parts, total = unknown_of(loaded, clean_text, corrupt_text)
    if not parts:
        return ""
    return Msg(
        "This model reads {n} of the two texts' {total} tokens as [UNK], one and the same token "
        "to it: {parts}; what it measures on this pair may be wrong.",
        n=len(parts),
        total=total,
        parts=named(parts),
    )


def token_of(loaded, text: str, what: str) -> int | None:
    """An answer box's token: a piece as the table shows it ("ĠMary", "v"), else a text that
    is one token (" Mary"); None when empty (the default is picked from the runs). A text the
    model reads as its unknown token is refused by name: every character it lacks is that one
    token ("!" and "😀" alike), so the measure would compare it with itself."""
    if not text:
        return None
    cfg, tok = loaded.net.config, loaded.tokenizer
    found = None
    if loaded.net.lm_head is None and cfg.token_labels:
        if text in cfg.token_labels:
            return list(cfg.token_labels).index(text)
    else:
        vocab = tok.get_vocab() if hasattr(tok, "get_vocab") else {}
        if text in vocab:
            return int(vocab[text])
        if (listed := vocab.get(vocabulary_piece(tok, text))) is not None:
            return int(listed)  # a piece as the Answer list shows it ("‹\xEC›", " Mary")
        if (past := past_the_table(loaded, text)) is not None:
            return past
        ids = tok.encode(text, add_special_tokens=False) if vocab else tok.encode(text)
        if len(ids) == 1:
            found = int(ids[0])
    unk = getattr(tok, "unk_token_id", None)
    if found is not None and (found != unk or text == getattr(tok, "unk_token", None)):
        return found
    if found is not None or (unk is not None and unknown_parts(tok, kind_of(loaded), text)[0]):
        raise InputError(
            Msg(
                "{what} “{text}” is not in this model's vocabulary (it reads it as [UNK]): "
                "pick one of its top 5 from the list.",
                what=Msg(what),
                text=text[:40],
            )
        )
    raise InputError(
        Msg(
            "{what} “{text}” is not one token of this model: pick one of its top 5 from the "
            "list, or type a single token.",
            what=Msg(what),
            text=text[:40],
        )
    )


def vocabulary_piece(tok, text: str) -> str | None:
    """The vocabulary's piece a language model's list shows as ``text`` (model.pieces.readable,
    undone): "‹\\xEC›" or "我" -> their bytes' byte-level characters ("ì", "æĪĳ"), " Mary" ->
    "ĠMary" or SentencePiece's "▁Mary". The text a piece shows is not always what the tokenizer
    makes of it: a byte that is no whole character is written "‹\\xEC›", four tokens."""
    if not hasattr(tok, "byte_level"):  # not a language model's ReadableTokenizer
        return None
    if not tok.byte_level:
        return text.replace(" ", "▁")
    whole = BYTE_PIECE.fullmatch(text)
    raw = bytes.fromhex(whole.group(1).replace("\\x", "")) if whole else text.encode("utf-8")
    return "".join(BYTE_CHARS[b] for b in raw)


def past_the_table(loaded, text: str) -> int | None:
    """An output id the tokenizer has no piece for, as the Answer list shows it ("‹315›"): a
    language model's output layer may be wider than its tokenizer's table (rows padded)."""
    tok = loaded.tokenizer
    found = PAST_THE_TABLE.fullmatch(text) if hasattr(tok, "byte_level") else None
    if found is None or not len(tok) <= int(found.group(1)) < loaded.net.config.vocab_size:
        return None
    return int(found.group(1))


def position_of(text: str) -> int | None:
    """The position box: "" = the default; "3" or "3·it" (a choice's label) = position 3."""
    head = str(text or "").partition("·")[0].strip()
    if not head:
        return None
    try:
        return int(head)
    except ValueError:
        raise InputError(
            Msg("The position read must be a token's number, as the list shows them.")
        ) from None


def position_label(i: int, token: str) -> str:
    """A position as the Position box lists and keeps it: "10·v" (its number, then its token,
    cut as a link cuts the box: ui.state keeps 8 characters)."""
    return f"{i}·{display_token(token)}"[:READ_AT_CHARS]


READ_AT_CHARS = 8


def stale_boxes(loaded, clean: dict, read_at: str) -> str:
    """A sentence when the Position box names a token the page's text does not have there: the
    boxes hold what Patch measured on another text (they are kept across Runs), so the Answer,
    Wrong answer and Position are this pair's own defaults instead; "" when they still fit (a
    typed number, a shipped pair's "11", or the same token at that place)."""
    number, dot, token = str(read_at or "").partition("·")
    if not dot or not token or not number.strip().isdigit():
        return ""
    head = loaded.net.lm_head is not None or bool(loaded.net.config.token_labels)
    ids = clean["tgt_ids"] if "tgt_ids" in clean and head else clean["input_ids"]
    tokens = loaded.tokenizer.convert_ids_to_tokens(ids[0].tolist())
    i = int(number)
    if i < len(tokens) and position_label(i, tokens[i]) == str(read_at)[:READ_AT_CHARS]:
        return ""
    return Msg(
        "The Answer, Wrong answer and Position read boxes held the measure of another text "
        "(position {box}): this pair's own were measured, and the boxes now show them.",
        box=str(read_at)[:READ_AT_CHARS],
    )


def read_position(loaded, text: str, word: str) -> int | None:
    """Where an encoder's shipped pair reads its word ("it", "它"): its first position."""
    if not word:
        return None
    ids = text_ids(loaded, text, loaded.net.config.arch == "decoder")
    tokens = [t.lstrip("Ġ▁#").lower() for t in loaded.tokenizer.convert_ids_to_tokens(ids)]
    return tokens.index(word.lower()) if word.lower() in tokens else None
