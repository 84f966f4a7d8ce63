"""A language model's vocabulary pieces read as the text they stand for.

GPT-2, LLaMA 3, Qwen2 and SmolLM write text as byte-level BPE pieces ("Ġcat" is " cat", "Ċ" a new
line, "æĪĳ" 我); LLaMA 2 and Mistral as SentencePiece pieces ("▁the", "<0x0A>"). The page shows
the text: the trace's tokens, the Output tab's predictions and the logit lens all come through a
``ReadableTokenizer``. No Gradio, no torch.
"""

from __future__ import annotations

import contextlib


def byte_alphabet() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, character -> byte: printable bytes stand for themselves,
    the others (space, new line, control bytes) for characters from U+0100 on (space is "Ġ",
    new line "Ċ"), so every byte sequence is a string of visible characters (Radford et al.
    2019, §2.2; GPT-2's encoder.py bytes_to_unicode)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    kept += range(ord("®"), ord("ÿ") + 1)
    shifted = [b for b in range(256) if b not in kept]
    return {chr(b): b for b in kept} | {chr(256 + n): b for n, b in enumerate(shifted)}


BYTES = byte_alphabet()


def readable(piece: str | None, byte_level: bool, token_id: int) -> str:
    """A vocabulary piece as the text it stands for: byte-level pieces decoded from their bytes
    ("Ġcat" -> " cat", "Ċ" -> a new line, "æĪĳ" -> "我"), SentencePiece's "▁" as a space and
    its byte pieces ("<0x0A>") as their character. A piece holding part of a character's UTF-8
    bytes is shown as those bytes ("‹\\xE6\\x88›"); an id past the tokenizer's table as "‹id›"."""
    if piece is None:
        return f"‹{token_id}›"
    if byte_level and all(ch in BYTES for ch in piece):
        raw = bytes(BYTES[ch] for ch in piece)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "‹" + "".join(f"\\x{b:02X}" for b in raw) + "›"
    if piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:
        with contextlib.suppress(ValueError):
            return chr(int(piece[3:5], 16)) if int(piece[3:5], 16) < 128 else piece
    return piece.replace("▁", " ")


class ReadableTokenizer:
    """A language model's Hugging Face tokenizer whose pieces read as text: everything is
    delegated, except that ``convert_ids_to_tokens`` returns ``readable`` pieces (special tokens
    as they are). The trace's tokens, the Output tab's predictions and the logit lens then show
    " cat" (drawn "␣cat") where the vocabulary says "Ġcat"."""

    def __init__(self, tokenizer) -> None:
        self.hf = tokenizer
        decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
        self.byte_level = "ByteLevel" in type(decoder).__name__ or "ByteLevel" in repr(decoder)
        self.special = set(tokenizer.all_special_ids)

    def __getattr__(self, name):  # only what the wrapper lacks; never "hf" (a copy being made)
        if name == "hf":
            raise AttributeError(name)
        return getattr(self.hf, name)

    def __call__(self, *args, **kwargs):
        return self.hf(*args, **kwargs)

    def __len__(self) -> int:
        return len(self.hf)

    def piece(self, token_id: int) -> str | None:
        """The vocabulary's own piece ("Ġcat"), None past its table."""
        return self.hf.convert_ids_to_tokens(token_id)

    def convert_ids_to_tokens(self, ids, skip_special_tokens: bool = False):
        if isinstance(ids, int):
            return self.convert_ids_to_tokens([ids], skip_special_tokens)[0]
        ids = [int(i) for i in ids]
        if skip_special_tokens:
            ids = [i for i in ids if i not in self.special]
        pieces = self.hf.convert_ids_to_tokens(ids)
        return [
            piece
            if i in self.special and piece is not None
            else readable(piece, self.byte_level, i)
            for piece, i in zip(pieces, ids, strict=True)
        ]
