"""The character-level tokenizer of the from-scratch presets (BERT's WordPiece comes with BERT).

Seed 002 trains "以字为单位" (one token per character); seed 001 shows why order
matters with 我喜欢你 / 你喜欢我. No training data is needed: a character's id is its
Unicode code point (offset by the special tokens), so the same character has the same id in
every text, process and script.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "<s>", "</s>")
N_SPECIAL = len(SPECIAL_TOKENS)
BMP_SIZE = 0x10000  # the Basic Multilingual Plane: every living script, CJK's common characters


class CharTokenizer:
    """One token per Unicode character of the Basic Multilingual Plane; others become [UNK].

    Call it like a Hugging Face tokenizer: ``tok(["我喜欢你"], padding=True, return_tensors="pt")``
    returns ``{"input_ids": LongTensor[B, T], "attention_mask": LongTensor[B, T]}``.
    Characters above U+FFFF (most emoji, rare CJK extensions) map to [UNK]: giving each of the
    1.1 million code points its own embedding row would cost gigabytes.
    """

    vocab_size = N_SPECIAL + BMP_SIZE
    pad_token, unk_token, bos_token, eos_token = SPECIAL_TOKENS
    pad_token_id, unk_token_id, bos_token_id, eos_token_id = range(N_SPECIAL)
    all_special_ids = list(range(N_SPECIAL))
    all_special_tokens = list(SPECIAL_TOKENS)

    def __init__(self, model_max_length: int = 512) -> None:
        self.model_max_length = model_max_length

    def tokenize(self, text: str) -> list[str]:
        return list(text)

    def char_to_id(self, char: str) -> int:
        code = ord(char)
        return N_SPECIAL + code if code < BMP_SIZE else self.unk_token_id

    def convert_ids_to_tokens(self, ids: Sequence[int] | torch.Tensor) -> list[str]:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return [SPECIAL_TOKENS[i] if i < N_SPECIAL else chr(i - N_SPECIAL) for i in ids]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = [self.char_to_id(c) for c in text]
        if add_special_tokens:
            ids = [self.bos_token_id, *ids, self.eos_token_id]
        return ids

    def decode(self, ids: Sequence[int] | torch.Tensor, skip_special_tokens: bool = True) -> str:
        """Ids back to text; special tokens (padding, <s>, </s>) dropped unless asked for."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        if skip_special_tokens:
            ids = [i for i in ids if i not in self.all_special_ids or i == self.unk_token_id]
        return "".join(self.convert_ids_to_tokens(ids))

    def __call__(
        self,
        texts: str | Sequence[str],
        padding: bool = True,
        truncation: bool = False,
        max_length: int | None = None,
        return_tensors: str | None = "pt",
        add_special_tokens: bool = False,
    ) -> dict:
        """Encode one text or a batch; pads on the right with [PAD] (id 0) and returns a mask."""
        batch = [texts] if isinstance(texts, str) else list(texts)
        ids = [self.encode(t, add_special_tokens) for t in batch]
        if truncation:
            limit = max_length or self.model_max_length
            ids = [seq[:limit] for seq in ids]
        width = max((len(seq) for seq in ids), default=0)
        if not padding and len({len(seq) for seq in ids}) > 1:
            raise ValueError("Texts of different length need padding=True to form one batch.")
        input_ids = [seq + [self.pad_token_id] * (width - len(seq)) for seq in ids]
        mask = [[1] * len(seq) + [0] * (width - len(seq)) for seq in ids]
        if return_tensors == "pt":
            return {
                "input_ids": torch.tensor(input_ids, dtype=torch.long).view(len(batch), width),
                "attention_mask": torch.tensor(mask, dtype=torch.long).view(len(batch), width),
            }
        return {"input_ids": input_ids, "attention_mask": mask}


class VocabTokenizer(CharTokenizer):
    """One token per character of a small fixed alphabet (the trained models'); others are [UNK].

    The same special tokens and ids as CharTokenizer, then ``chars`` in order: a vocabulary of
    a few dozen rows instead of 65,540, so a trained model's embedding table stays small.
    """

    def __init__(self, chars: str | Sequence[str], model_max_length: int = 128) -> None:
        super().__init__(model_max_length)
        chars = list(chars)
        if len(set(chars)) != len(chars) or any(len(c) != 1 for c in chars):
            raise ValueError("A VocabTokenizer's alphabet must be distinct single characters.")
        self.chars = "".join(chars)
        self.tokens = [*SPECIAL_TOKENS, *chars]
        self.vocab_size = len(self.tokens)
        self.ids = {c: N_SPECIAL + i for i, c in enumerate(chars)}

    def char_to_id(self, char: str) -> int:
        return self.ids.get(char, self.unk_token_id)

    def convert_ids_to_tokens(self, ids: Sequence[int] | torch.Tensor) -> list[str]:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return [self.tokens[i] for i in ids]

    def to_dict(self) -> dict:
        """What tokenizer.json holds; VocabTokenizer(**d) rebuilds it."""
        return {"chars": self.chars, "model_max_length": self.model_max_length}
