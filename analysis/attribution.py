"""Direct logit attribution: what each head, MLP and the embeddings write straight into an answer.

In a pre-norm decoder the residual stream at the last layer is a sum: the embeddings, then each
layer's attention output (one term per head, z_h W_O^h, plus W_O's bias) and MLP output. The
final norm divides that sum by one scale measured on the run (and, for LayerNorm, subtracts its
mean), so with the scale held at its measured value every term's share of the logit difference
is linear: TransformerLens's ``cache.apply_ln_to_stack`` / ``logit_attrs`` convention (Elhage et
al. 2021, "A Mathematical Framework for Transformer Circuits"; Wang et al. 2022, §3.1).
"""

from __future__ import annotations

import torch
from torch import nn

from lang import Msg
from model.norms import RMSNorm


def direct_logit_attribution(
    net: nn.Module, trace, answer: int, wrong: int, position: int = -1, item: int = 0
) -> dict[str, torch.Tensor]:
    """Each component's direct contribution to logits[answer] − logits[wrong] at a position.

    Args:
        net: the pre-norm decoder-only Transformer that made ``trace`` (GPT-2, LLaMA, Qwen2,
            Mistral, the induction model, seed001-decoder).
        trace: its trace of the text (net.trace(...)); answer, wrong: token ids; position, item:
            where the answer is read.
    Returns:
        {"embed": [] the embeddings (the stream entering layer 0), "heads": [L, H] each head's
        z_h W_O^h, "attn_bias": [L] W_O's bias as its own term (zeros without one), "mlp": [L]
        each MLP's output, "bias": [] the final norm's bias and the LM head's bias (constants of
        the run), "logit_diff": [] the model's own difference}, float32 on the CPU. Each term
        is (component − its mean for LayerNorm) / the final norm's scale of the whole residual
        at that position · (g ⊙ (W_U[answer] − W_U[wrong])); every term added up is logit_diff
        (to float rounding). Raises ValueError for a model it does not apply to.
    """
    cfg = net.config
    if cfg.arch != "decoder" or cfg.norm != "pre" or net.lm_head is None:
        raise ValueError(
            Msg(
                "Direct logit attribution reads a pre-norm decoder's residual stream as a sum; "
                "{name} is not one (a post-norm model or an encoder renormalises it every layer).",
                name=cfg.name,
            )
        )
    stack = net.decoder
    hidden = trace.hidden_states["decoder"][item]  # (L+1, T, d_model)
    pos = position % hidden.shape[1]
    with torch.no_grad():
        w = net.lm_head.weight  # (V, d_model)
        direction = (w[answer] - w[wrong]).to(hidden)  # (d_model,)
        constant = hidden.new_zeros(())
        if net.lm_head.bias is not None:
            constant = constant + (net.lm_head.bias[answer] - net.lm_head.bias[wrong]).to(hidden)
        resid = hidden[-1, pos]  # (d_model,): the stream the final norm reads
        norm = stack.final_norm
        rms = isinstance(norm, RMSNorm)

        def center(x: torch.Tensor) -> torch.Tensor:  # LayerNorm subtracts the mean, RMSNorm not
            return x if rms or norm is None else x - x.mean(-1, keepdim=True)

        scale = hidden.new_ones(())
        if norm is not None:
            r = center(resid)
            scale = torch.sqrt(r.pow(2).mean() + norm.eps)  # σ (LayerNorm) or RMS, of this run
            if norm.weight is not None:  # the gain: w, or Gemma's 1 + w (RMSNorm.gain)
                direction = direction * getattr(norm, "gain", norm.weight).to(direction)
            if getattr(norm, "bias", None) is not None:
                constant = constant + (norm.bias.to(direction) @ (w[answer] - w[wrong]).to(resid))

        def read(x: torch.Tensor) -> torch.Tensor:  # [..., d_model] -> [...]
            return (center(x) / scale) @ direction

        d_head, n_heads = cfg.d_head, cfg.n_heads
        z = trace.attentions["decoder"][item] @ trace.values["decoder"][item]  # (L, H, T, d_head)
        heads, attn_bias, mlp = [], [], []
        for layer, block in enumerate(stack.layers):
            w_o = block.self_attn.w_o
            w_heads = w_o.weight.T.reshape(n_heads, d_head, -1).to(z)  # (H, d_head, d_model)
            per_head = torch.einsum("hd,hde->he", z[layer, :, pos], w_heads)  # (H, d_model)
            heads.append(read(per_head))
            bias = w_o.bias
            attn_bias.append(read(bias.to(z)) if bias is not None else hidden.new_zeros(()))
            mlp.append(read(trace.mlp_out["decoder"][item, layer, pos]))
        logits = net.lm_head(net.decoder.final_norm(resid) if norm is not None else resid)
    found = {
        "embed": read(hidden[0, pos]),
        "heads": torch.stack(heads),  # (L, H)
        "attn_bias": torch.stack(attn_bias),  # (L,)
        "mlp": torch.stack(mlp),  # (L,)
        "bias": constant,
        "logit_diff": logits[answer] - logits[wrong],
    }
    return {name: value.detach().float().cpu() for name, value in found.items()}
