"""Config validation, presets, and the character tokenizer."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from model import PRESETS, CharTokenizer, TransformerConfig


def test_config_is_frozen():
    cfg = TransformerConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 8  # type: ignore[misc]


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"d_model": 64, "n_heads": 5}, "divisible by n_heads"),
        ({"arch": "rnn"}, "arch must be"),
        ({"norm": "middle"}, "norm must be"),
        ({"activation": "swish"}, "activation must be"),
        ({"positions": "alibi"}, "positions must be"),  # rotary is valid since issue 28
        ({"n_layers": 0}, "n_layers must be a positive integer"),
        ({"dropout": 1.5}, "dropout must be"),
        ({"d_model": 15, "n_heads": 3}, "must be even"),
        ({"pad_id": -1}, "outside the vocabulary"),
    ],
)
def test_invalid_configs_raise_a_clear_value_error(changes, words):
    with pytest.raises(ValueError, match=words):
        TransformerConfig(**changes)


def test_there_is_a_preset_for_each_seed_and_each_family():
    sources = " ".join(cfg.source for cfg in PRESETS.values())
    for seed in ("000", "001", "002", "003", "004"):
        assert f"seed {seed}" in sources
    archs = {cfg.arch for cfg in PRESETS.values()}
    assert archs == {"encoder", "decoder", "encoder-decoder"}
    assert {cfg.norm for cfg in PRESETS.values()} == {"post", "pre"}
    assert {cfg.positions for cfg in PRESETS.values()} == {"sinusoidal", "learned"}
    paper = PRESETS["seed000-transformer"]
    assert (paper.d_model, paper.n_heads, paper.n_layers, paper.d_ff) == (512, 8, 6, 2048)


def test_chinese_tokenizes_to_characters_with_stable_ids():
    tok = CharTokenizer()
    a = tok(["我喜欢你"])["input_ids"][0].tolist()
    b = tok(["你喜欢我"])["input_ids"][0].tolist()
    assert tok.convert_ids_to_tokens(a) == ["我", "喜", "欢", "你"]
    assert sorted(a) == sorted(b) and a != b  # same tokens, different order
    assert a[0] == b[3] and a[3] == b[0]


@pytest.mark.parametrize(
    "text", ["Héllo", "Привет", "مرحبا", "שלום", "नमस्ते", "こんにちは", "한국어", "ΑΒΓ"]
)
def test_every_script_of_the_bmp_round_trips(text):
    tok = CharTokenizer()
    ids = tok.encode(text)
    assert tok.unk_token_id not in ids
    assert "".join(tok.convert_ids_to_tokens(ids)) == text


def test_characters_beyond_the_bmp_become_unk():
    tok = CharTokenizer()
    assert tok.encode("a😀") == [tok.char_to_id("a"), tok.unk_token_id]


def test_batch_is_right_padded_with_a_mask_and_specials_are_optional():
    tok = CharTokenizer()
    enc = tok(["ab", "abcd"], padding=True, return_tensors="pt")
    assert enc["input_ids"].shape == (2, 4)
    assert enc["attention_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert enc["input_ids"][0, 2:].tolist() == [tok.pad_token_id] * 2
    with_specials = tok.encode("ab", add_special_tokens=True)
    assert tok.convert_ids_to_tokens(with_specials) == ["<s>", "a", "b", "</s>"]
    assert tok(["abcdef"], truncation=True, max_length=3)["input_ids"].shape == (1, 3)
    assert torch.all(tok(["x"])["input_ids"] < CharTokenizer.vocab_size)
