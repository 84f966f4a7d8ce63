"""The attention weights (W_Q, W_K, W_V, W_O) a measure needs, read from the model that traced.

A Trace carries activations, not parameters; measures that need a projection take the model
(``net``) too and check that it has the trace's shape.
"""

from __future__ import annotations

import torch
from torch import nn

from analysis.tokens import check_stack
from model.replay import Replay
from model.trace import Trace


def attention_modules(net: nn.Module, stack: str) -> list[nn.Module]:
    """The MultiHeadAttention module of every layer of one stack, in layer order."""
    if stack == "encoder" and getattr(net, "encoder", None) is not None:
        return [layer.self_attn for layer in net.encoder.layers]
    if stack in ("decoder", "cross") and getattr(net, "decoder", None) is not None:
        modules = [
            layer.self_attn if stack == "decoder" else layer.cross_attn
            for layer in net.decoder.layers
        ]
        if all(m is not None for m in modules):
            return modules
    raise ValueError(f"This model has no {stack!r} attention.")


def check_net(trace: Trace, net: nn.Module | None, stack: str, what: str) -> list[nn.Module]:
    """The stack's attention modules, after checking that ``net`` is the model of this trace."""
    check_stack(trace, stack)
    if net is None:
        raise ValueError(
            f"{what} needs the model's weights, which a Trace does not carry: pass net=<the model "
            "that made the trace>."
        )
    cfg, mine = trace.config, net.config
    shape = (cfg.n_layers, cfg.n_heads, cfg.d_model)
    if (mine.n_layers, mine.n_heads, mine.d_model) != shape:
        raise ValueError(
            f"net has {mine.n_layers} layers x {mine.n_heads} heads of width {mine.d_model}, but "
            f"the trace came from {shape[0]} x {shape[1]} of width {shape[2]}: pass the model "
            "that made the trace."
        )
    return attention_modules(net, stack)


def model_of(trace: Trace, stack: str, net: nn.Module | None, what: str) -> Replay:
    """The modules of the model that made the trace, as a Replay (model/replay.py): from ``net``
    (checked against the trace), else from the trace itself; ``what`` names the asker."""
    if net is not None:
        check_net(trace, net, stack, what)
        return net.replay()
    replay = trace._replay
    home = "decoder" if stack == "cross" else stack
    if replay is None or home not in replay.stacks:
        raise ValueError(
            f"{what}: the model's weights are needed, and this trace no longer reaches them: "
            "pass net=<the model that made the trace>."
        )
    return replay


def per_head(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """An input projection's weight [d_model(out), d_model(in)] as [H, d_model(in), d_head].

    Rows h*d_head:(h+1)*d_head of W (nn.Linear layout) make head h (MultiHeadAttention.split).
    """
    d_model = weight.shape[1]
    return weight.view(n_heads, -1, d_model).transpose(1, 2)  # (H, d_model, d_head)


def output_per_head(w_o: torch.Tensor, n_heads: int) -> torch.Tensor:
    """W_O [d_model(out), d_model(in)] as W_O^h [H, d_head, d_model]: head h reads columns h."""
    d_model = w_o.shape[0]
    return w_o.T.reshape(n_heads, -1, d_model)  # (H, d_head, d_model)


def head_output_weights(trace: Trace, stack: str, net: nn.Module | None) -> torch.Tensor:
    """W_O^h of every layer, [L, H, d_head, d_model], on the trace's device and dtype.

    Taken from ``trace.w_o[stack]`` ([L, d_model, d_model], nn.Linear layout) when the trace
    carries it, else from ``net``.
    """
    values = trace.values[stack]  # (B, L, H, T_k, d_head)
    carried = getattr(trace, "w_o", None)
    if isinstance(carried, dict) and stack in carried:
        w_o = carried[stack]  # (L, d_model, d_model)
    else:
        modules = check_net(trace, net, stack, "The norm of f_h(x)")
        w_o = torch.stack([m.w_o.weight.detach() for m in modules])  # (L, d_model, d_model)
    n_heads = trace.config.n_heads
    w = torch.stack([output_per_head(layer, n_heads) for layer in w_o])  # (L, H, d_head, d_model)
    return w.detach().to(device=values.device, dtype=values.dtype)
