"""A language model's vocabulary pieces read as the text they stand for.

GPT-2, LLaMA 3, Qwen2 and SmolLM write text as byte-level BPE pieces ("Ġcat" is " cat", "Ċ" a new
line, "æĪĳ" 我); LLaMA 2 and Mistral as SentencePiece pieces ("▁the", "<0x0A>"). The page shows
the text: the trace's tokens, the Output tab's predictions, its greedy continuation and the logit
lens all come through a ``ReadableTokenizer``. No Gradio, no torch.
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


def piece_bytes(piece: str | None, byte_level: bool) -> bytes | None:
    """The bytes a vocabulary piece writes ("Ġcat" b" cat", "<0xE6>" b"\\xe6"); None for a
    piece that writes no known bytes (an id past the table, a byte-level one off the alphabet)."""
    if piece is None:
        return None
    if byte_level:
        return bytes(BYTES[ch] for ch in piece) if all(ch in BYTES for ch in piece) else None
    if piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:
        with contextlib.suppress(ValueError):
            return bytes([int(piece[3:5], 16)])
    return piece.replace("▁", " ").encode("utf-8")


def utf8_state(raw: bytes) -> str:
    """ "whole" UTF-8, a "part" that more bytes may complete, or "broken"."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return "part" if error.reason == "unexpected end of data" else "broken"
    return "whole"


def readable_text(pieces: list[str | None], ids: list[int], byte_level: bool) -> str:
    """Pieces in a row (a greedy continuation) read as one text: their bytes as text where they
    make whole characters, a character split over pieces included ("æĪ", "ĳ" -> "我"); a piece
    whose bytes make no character as ``readable`` shows it in the token table ("‹\\xA8›"), never
    as U+FFFD, which a decoder writes there."""
    out: list[str] = []
    pending: list[tuple[str | None, int, bytes]] = []  # pieces of a character not yet whole

    def flush() -> None:  # pending pieces that no later piece completes: as the table reads them
        out.extend(readable(piece, byte_level, i) for piece, i, _ in pending)
        pending.clear()

    for piece, i in zip(pieces, ids, strict=True):
        raw = piece_bytes(piece, byte_level)
        if raw is None:
            flush()
            out.append(readable(piece, byte_level, i))
            continue
        if pending and utf8_state(b"".join(r for *_, r in pending) + raw) == "broken":
            flush()  # this piece starts afresh
        pending.append((piece, i, raw))
        joined = b"".join(r for *_, r in pending)
        state = utf8_state(joined)
        if state == "whole":
            out.append(joined.decode("utf-8"))
            pending.clear()
        elif state == "broken":
            flush()
    flush()
    return "".join(out)


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

    def text(self, ids) -> str:
        """Generated ids as the text they write (``readable_text``), special tokens left out."""
        ids = [int(i) for i in ids if int(i) not in self.special]
        return readable_text(self.hf.convert_ids_to_tokens(ids), ids, self.byte_level)

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
