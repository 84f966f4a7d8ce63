"""A checkpoint family as data: the tables the loading pipeline (model/checkpoint.py) reads.

A ``Family`` says how to read its config.json into our ``TransformerConfig``, which Hugging Face
tensor fills which of our weights (a table of ``Source``s, nanoGPT's ``from_pretrained`` in
spirit), and which tokenizer files it brings. The shape every HF tensor must have follows from our
model's: ``expected_shapes`` builds it on PyTorch's meta device (shapes, no memory), so a
checkpoint's header is judged before anything is allocated. The families: BERT (model/bert.py),
GPT-2 and the LLaMA family (model/lm_families.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from model.config import TransformerConfig
from model.transformer import Transformer


@dataclass(frozen=True)
class Source:
    """Where one of our weights comes from: a HF tensor, maybe transposed, maybe a part of it."""

    key: str  # HF's name, without the model's prefix ("bert.", "transformer.", "model.")
    transpose: bool = False  # Conv1D [in, out] -> nn.Linear [out, in]
    part: tuple[int, int] | None = None  # (index, parts) of a fused tensor, split on its last dim


@dataclass(frozen=True)
class TokenizerFiles:
    """The files a family's tokenizer loader may open, and which of them it needs."""

    limits: dict[str, int]  # file -> the most bytes it may have
    needs: tuple[tuple[str, ...], ...]  # one of these groups of files must all be there
    needs_said: str  # the groups, said in a sentence (a lang.Msg): "vocab.txt or tokenizer.json"
    load: Callable[[Path], object]  # the judged folder -> a transformers tokenizer
    chat_templates: bool = False  # whether an additional_chat_templates/ folder may come along
    counted_lines: str | None = None  # a one-token-a-line vocabulary to count against the table


@dataclass(frozen=True)
class Family:
    """One checkpoint family: its config reader, its weight tables and its tokenizer's files."""

    name: str  # said to people: "BERT", "GPT-2", "LLaMA"
    read_config: Callable[[dict, str], TransformerConfig]  # config.json, name -> ours
    top: dict[str, Source]  # our key -> its source, outside the layers
    layer: dict[str, Source]  # our key inside layer i -> its source inside HF's layer i
    our_layer: str  # our layers' prefix: "encoder.layers." or "decoder.layers."
    hf_layer: str  # HF's layers' prefix: "encoder.layer.", "h." or "layers."
    hf_name: Callable[[str], str]  # a key of the file -> HF's name in the tables
    not_weights: re.Pattern  # HF names a file may hold that are no weights of ours
    tokenizer: TokenizerFiles
    reads_bin: bool = False  # pytorch_model.bin, opened weights-only, when no safetensors
    fit: Callable[[TransformerConfig, set[str]], TransformerConfig] = field(
        default=lambda config, names: config
    )  # the config once the file's HF names are known (BERT: whether it has a pooler)
    pad_from_tokenizer: bool = False  # the tokenizer's padding id is the model's


def meta_weights(config: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our state dict for ``config`` on the meta device: names and shapes, no memory."""
    with torch.device("meta"):
        return Transformer(config).state_dict()


def weight_map(
    config: TransformerConfig, family: Family, ours: dict[str, torch.Tensor] | None = None
) -> dict[str, Source]:
    """Our state-dict key -> its HF source, for every weight a model of ``config`` has."""
    ours = dict(meta_weights(config) if ours is None else ours)
    if config.tie_lm_head:
        ours.pop("lm_head.weight")  # the token embedding's matrix
    sources = {}
    for key in ours:
        inside = key.removeprefix(family.our_layer)
        if inside == key:
            source = family.top.get(key)
        else:
            i, rest = inside.split(".", 1)
            source = family.layer.get(rest)
            if source is not None:
                source = Source(f"{family.hf_layer}{i}.{source.key}", source.transpose, source.part)
        assert source is not None, f"no HF source for {key}"  # a new weight needs a table row
        sources[key] = source
    return sources


def expected_shapes(config: TransformerConfig, family: Family) -> dict[str, tuple[int, ...]]:
    """HF name -> the shape our model implies for it (a fused tensor: its parts side by side)."""
    ours = meta_weights(config)
    shapes: dict[str, tuple[int, ...]] = {}
    for key, source in weight_map(config, family, ours).items():
        shape = tuple(ours[key].shape)
        if source.transpose:
            shape = shape[::-1]
        if source.part is not None:
            shape = (*shape[:-1], shape[-1] * source.part[1])
        assert shapes.setdefault(source.key, shape) == shape, source.key  # parts agree
    return shapes


def n_params(shapes: dict[str, tuple[int, ...]]) -> int:
    """Numbers in the tensors of ``expected_shapes``."""
    return sum(math.prod(shape) for shape in shapes.values())
