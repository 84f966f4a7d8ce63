"""The logit lens (nostalgebraist 2020): read every layer's residual stream as if it were the last.

Each row of hidden_states[stack] [B, L+1, T, d_model] (the embedding output, then each layer's
output) goes through what the model applies between its last layer and its logits: the stack's
final LayerNorm when it has one (pre-norm, seed 001), then the LM head. The last row is then
exactly the model's own output distribution; earlier rows show what the stream "would say" if the
model stopped there.
"""

from __future__ import annotations

import torch

from model.trace import Trace


def logit_lens(net, trace: Trace, stack: str = "decoder", item: int = 0) -> torch.Tensor:
    """Probabilities [L+1, T, V] of one text: row l is softmax(lm_head(final_norm(h_l))).

    Args:
        net: the model that made the trace (the lens uses its final LayerNorm and LM head).
        trace: a Trace of ``net``.
        stack: the stack whose output feeds the LM head ("decoder" for a decoder-only or an
            encoder-decoder model, "encoder" for an encoder with an LM head).
        item: which text of the batch.
    """
    if getattr(net, "lm_head", None) is None:
        raise ValueError("This model has no LM head, so its layers predict no tokens to read.")
    feeds = "decoder" if net.config.has_decoder else "encoder"
    if stack != feeds:
        raise ValueError(
            f"Only the {feeds} feeds this model's LM head; the logit lens reads the {feeds!r} "
            f"stack, not {stack!r}."
        )
    if stack not in trace.hidden_states:
        raise ValueError(f"This trace has no {stack!r} residual stream.")
    hidden = trace.hidden_states[stack][item]  # (L+1, T, d_model)
    final_norm = getattr(net, stack).final_norm
    with torch.no_grad():
        hidden = hidden.to(net.device)
        if final_norm is not None:
            hidden = final_norm(hidden)
        return torch.softmax(net.lm_head(hidden).float(), dim=-1).cpu()  # (L+1, T, V)
