"""BERT-base- and BERT-large-shaped checkpoints (issue 11): loaded, and equal to HF BERT eager.

The checkpoints are made here with seeded random weights (bench/shapes.py, cached after the
first run; nothing is downloaded). A short padded batch keeps the file fast: parity does not
depend on length (tests/test_bert_parity.py covers 300+ tokens on the bundled model).
"""

from __future__ import annotations

import pytest
import torch

from bench.shapes import SHAPES, make_checkpoint

TOL = 1e-5  # the repository's parity tolerance (tests/test_bert_parity.py)
TEXTS = ["time flies like an arrow", "I have a dog"]
PARAMS = {"base": 109_482_240, "large": 335_141_888}  # BertModel with pooler, 30,522 tokens


def hf_internals(hf, enc) -> tuple[object, dict[str, list[torch.Tensor]]]:
    """HF eager outputs, and per layer its Q/K/V projections and sublayer outputs (by hooks)."""
    seen: dict[str, list[torch.Tensor]] = {}
    handles = []

    def catch(name):
        return lambda module, args, output: seen.setdefault(name, []).append(output)

    for layer in hf.encoder.layer:
        for name, module in (
            ("queries", layer.attention.self.query),
            ("keys", layer.attention.self.key),
            ("values", layer.attention.self.value),
            ("attn_out", layer.attention.output.dense),  # before dropout, residual and LayerNorm
            ("mlp_out", layer.output.dense),
        ):
            handles.append(module.register_forward_hook(catch(name)))
    try:
        with torch.no_grad():
            ref = hf(**enc, output_attentions=True, output_hidden_states=True)
    finally:
        for handle in handles:
            handle.remove()
    return ref, seen


@pytest.mark.parametrize("shape", SHAPES)
def test_big_shape_loads_and_every_field_matches_hf_bert_eager(shape):
    from transformers import BertModel

    from model import load_bert

    folder = make_checkpoint(shape)
    net, tok = load_bert(folder, device="cpu")  # the default caps accept BERT-large's 335M
    n_layers, n_heads, d_model, d_ff = SHAPES[shape]
    cfg = net.config
    assert (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_ff) == (n_layers, n_heads, d_model, d_ff)
    assert net.get_num_params() == PARAMS[shape]
    hf = BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()

    enc = tok(TEXTS, padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    lean = tr.nbytes()
    ref, seen = hf_internals(hf, enc)
    for layer in range(n_layers):
        torch.testing.assert_close(
            tr.attentions["encoder"][:, layer], ref.attentions[layer], atol=TOL, rtol=0
        )
    torch.testing.assert_close(
        tr.hidden_states["encoder"], torch.stack(ref.hidden_states, 1), atol=TOL, rtol=0
    )
    torch.testing.assert_close(tr.outputs["encoder"], ref.last_hidden_state, atol=TOL, rtol=0)
    torch.testing.assert_close(tr.pooled, ref.pooler_output, atol=TOL, rtol=0)

    # The lean trace computes these on first access; they are what HF computed too.
    batch, tokens = enc["input_ids"].shape
    for name in ("queries", "keys", "values"):
        theirs = torch.stack(seen[name], 1)  # (B, L, T, d_model)
        theirs = theirs.view(batch, n_layers, tokens, n_heads, -1).transpose(2, 3)  # (B,L,H,T,dh)
        torch.testing.assert_close(getattr(tr, name)["encoder"], theirs, atol=TOL, rtol=0)
    for name in ("attn_out", "mlp_out"):
        theirs = torch.stack(seen[name], 1)  # (B, L, T, d_model)
        torch.testing.assert_close(getattr(tr, name)["encoder"], theirs, atol=TOL, rtol=0)
    # Scores, masked and normalised, are the attention weights the trace stored.
    mask = tr.masks["encoder"][:, None, None]  # (B, 1, 1, T, T)
    weights = torch.softmax(tr.scores["encoder"].masked_fill(~mask, float("-inf")), dim=-1)
    torch.testing.assert_close(weights, tr.attentions["encoder"], atol=1e-6, rtol=0)
    assert tr.nbytes() > lean
