"""Our encoder with the bundled weights equals transformers.BertModel (eager) layer by layer."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import LONG_TEXT

TOL = 1e-5

CASES = {
    "english": ["time flies like an arrow"],
    "padded batch": ["A Titan RTX has 24GB of VRAM", "I have a dog"],
    "chinese": ["我喜欢你", "你喜欢我"],
    "300+ tokens": [LONG_TEXT],
}


@pytest.mark.parametrize("texts", CASES.values(), ids=CASES.keys())
def test_every_attention_and_hidden_state_matches_hf_bert(bert, hf_bert, texts):
    net, tok = bert
    enc = tok(texts, padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    with torch.no_grad():
        ref = hf_bert(**enc, output_attentions=True, output_hidden_states=True)
    n_layers = net.config.n_layers
    assert len(ref.attentions) == n_layers and len(ref.hidden_states) == n_layers + 1
    for layer in range(n_layers):
        ours = tr.attentions["encoder"][:, layer]
        torch.testing.assert_close(ours, ref.attentions[layer], atol=TOL, rtol=0)
    for layer in range(n_layers + 1):
        ours = tr.hidden_states["encoder"][:, layer]
        torch.testing.assert_close(ours, ref.hidden_states[layer], atol=TOL, rtol=0)
    torch.testing.assert_close(tr.outputs["encoder"], ref.last_hidden_state, atol=TOL, rtol=0)
    torch.testing.assert_close(tr.pooled, ref.pooler_output, atol=TOL, rtol=0)


def test_long_case_really_is_over_300_tokens(bert):
    _, tok = bert
    assert len(tok(LONG_TEXT)["input_ids"]) > 300


def test_padded_keys_get_exactly_zero_in_real_bert(bert):
    net, tok = bert
    enc = tok(["A Titan RTX has 24GB of VRAM", "I have a dog"], padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    pad = enc["attention_mask"][1] == 0
    assert pad.any()
    assert torch.all(tr.attentions["encoder"][1, :, :, :, pad] == 0)


def test_chinese_text_is_split_into_characters_by_wordpiece(bert):
    net, tok = bert
    enc = tok(["我喜欢你"], return_tensors="pt")
    tr = net.trace(enc["input_ids"])
    assert tr.tokens[0][0] == "[CLS]" and tr.tokens[0][-1] == "[SEP]"
    assert len(tr.tokens[0]) == 6
