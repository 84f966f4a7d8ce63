"""Attribution patching: activation patching estimated to first order from gradients.

Patching one activation a from the clean run into the corrupt one changes the metric by about
(a_clean − a_corrupt) · ∂m/∂a: one backward pass estimates every head's and position's share at
once (Nanda 2023, "Attribution Patching"; Syed et al. 2023, "Attribution Patching Outperforms
Automated Circuit Discovery", EAP). The gradient is taken on the clean run (steps=1), or
averaged over runs whose embeddings go from the corrupt text's to the clean text's,
e_corrupt + (k/steps)(e_clean − e_corrupt) (integrated gradients, Sundararajan et al. 2017;
EAP-IG, Hanna et al. 2024, "Have Faith in Faithfulness"), which sees what one step at the clean
point misses where the metric saturates. ``ig_end`` names the end the sum includes: "clean",
k = 1 … steps (a right Riemann sum, ours: steps=1 is EAP), or "corrupt", k = 0 … steps − 1 (a
left Riemann sum, the EAP-IG authors' code: steps=1 is the gradient at the corrupt input).

Every share is divided by (m_clean − m_corrupt), as analysis.patch_heads' are; the runs are
one batched call through named sites (model/sites.py), never hooks on the shared model.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import SimpleNamespace

import torch
from torch import nn

from analysis.patching import Metric, _inputs, _item, _Pair
from model.sites import Sites, prefix

GRAD_TOKENS = 4096  # batch items × T per backward pass: the steps are cut into runs of this size
IG_ENDS = ("clean", "corrupt")  # the end of the straight line the integrated runs include
NO_GRADIENT = (
    "The metric gave a number without a gradient (a Python float, or a tensor cut off by "
    ".item(), float() or .detach()): attribution follows the metric's gradient, so return a "
    "torch tensor computed from the run's logits, as analysis.logit_diff does."
)


@dataclass
class Gradients:
    """What the integrated runs of N pairs measured at the sites asked for ([N, ...] each, N = 1
    for one pair): each site's value on the clean and on the corrupt texts, the metric's
    gradient there averaged over the steps, and the metric on both texts ([N] each)."""

    clean: dict[str, torch.Tensor]
    corrupt: dict[str, torch.Tensor]
    grads: dict[str, torch.Tensor]
    m_clean: torch.Tensor
    m_corrupt: torch.Tensor
    at_clean: dict[str, torch.Tensor]  # the gradient of the clean runs alone (k = steps)

    @property
    def gap(self) -> float:
        """Σ over the pairs of (m_clean − m_corrupt): what every share is divided by."""
        return float((self.m_clean - self.m_corrupt).sum())

    def effect(self, name: str, one_step: bool = False) -> torch.Tensor:
        """Σ over the pairs of (a_clean − a_corrupt) ⊙ mean ∂m/∂a at a site, elementwise, over
        the summed gap (the EAP-IG authors' dataset convention: their mean of raw scores over
        the mean gap); ``one_step``: the clean runs' gradient alone (what steps=1 measures)."""
        grad = self.at_clean[name] if one_step else self.grads[name]
        return ((self.clean[name] - self.corrupt[name]) * grad).sum(0) / self.gap


def stack_of(net: nn.Module, stack: str | None) -> str:
    """Whose heads: analysis.patch_heads' own choice (the model's first stack by default)."""
    return _Pair.stack(SimpleNamespace(net=net), stack)


def streams(net: nn.Module) -> list[str]:
    """The residual streams a model has ("encoder", "decoder"): whose embeddings are blended."""
    cfg = net.config
    return [s for s, here in (("encoder", cfg.has_encoder), ("decoder", cfg.has_decoder)) if here]


def _metric_tensor(metric: Metric, trace, n: int) -> torch.Tensor:
    """The metric over n batched runs as [n], its gradient kept; a metric that gives one number
    is asked item by item."""
    value = torch.as_tensor(metric(trace))
    if value.numel() == 1 and n > 1:
        value = torch.stack(
            [torch.as_tensor(metric(_item(trace, b))).reshape(()) for b in range(n)]
        )
    if value.numel() != n:
        raise ValueError(f"The metric gave {value.numel()} numbers for {n} runs.")
    return value.reshape(n)


def _blend(alphas: torch.Tensor, pairs: int):
    """x [(n + 1)·N, T, d_model] (n blocks of the N clean embeddings, then the N corrupt ones)
    -> block k blended as e_corrupt·(1 − α_k) + e_clean·α_k (exactly e_clean at α = 1), the
    corrupt block kept."""

    def blend(x: torch.Tensor) -> torch.Tensor:
        n = alphas.shape[0]
        a = alphas.to(x)[:, None, None, None]  # (n, 1, 1, 1)
        clean, corrupt = x[: n * pairs].unflatten(0, (n, pairs)), x[n * pairs :]
        mixed = corrupt[None] * (1 - a) + clean * a  # (n, N, T, d_model)
        return torch.cat([mixed.flatten(0, 1), corrupt])

    return blend


def _gaps(net, clean_in, corrupt_in, metric, trace, values, n: int, pairs: int):
    """(m_clean [N], m_corrupt [N]) from the first batch of runs: one pair is checked as
    patch_heads checks it (refused where its metric is the same on both texts); a dataset is
    refused where its gaps add up to nothing."""
    if pairs == 1:
        pair = _Pair(net, clean_in, corrupt_in, metric, (_item(trace, 0), _item(trace, n)))
        return torch.tensor([pair.m_clean, pair.m_corrupt], dtype=torch.float64).split(1)
    m = values.detach().double().cpu()
    m_clean, m_corrupt = m[:pairs], m[n * pairs : (n + 1) * pairs]
    if not abs(float((m_clean - m_corrupt).sum())) > 1e-6 * max(1.0, float(m_clean.abs().max())):
        raise ValueError("The metric's gaps between the clean and corrupt texts add up to 0.")
    return m_clean, m_corrupt


def _runs(steps: int, ig_end: str) -> tuple[list[int], list[float]]:
    """The blended runs' k (α = k/steps), the clean run (k = steps) first since it is read, and
    each run's weight in the sum: ig_end "clean" sums k = steps … 1, "corrupt" k = steps − 1 …
    0 (the clean run then measured for its values and one-step gradient alone, weight 0)."""
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps is a whole number of runs, at least 1, not {steps!r}.")
    if ig_end not in IG_ENDS:
        raise ValueError(f"ig_end is 'clean' or 'corrupt', not {ig_end!r}.")
    steps = int(steps)
    if ig_end == "clean":
        return list(range(steps, 0, -1)), [1.0] * steps
    return list(range(steps, -1, -1)), [0.0] + [1.0] * steps


def integrated(
    net: nn.Module,
    clean: Mapping,
    corrupt: Mapping,
    metric: Metric,
    steps: int,
    read: Collection[str],
    grad: Collection[str],
    ig_end: str = "clean",
) -> Gradients:
    """The sites ``read`` on both texts and the metric's gradient at the sites ``grad``, averaged
    over ``steps`` runs from the corrupt embeddings to the clean ones (steps=1: the clean run;
    ``ig_end``: which end of the line the runs include, see the module doc)."""
    ks, weights = _runs(steps, ig_end)
    clean_in, corrupt_in = _inputs(net, clean, corrupt, pairs=True)
    if set(clean_in) != set(corrupt_in):
        raise ValueError("The clean and corrupt encodings must hold the same inputs.")
    embeds = [f"{prefix(net.config, s)}.0.hook_resid_pre" for s in streams(net)]
    pairs, n_tokens = clean_in["input_ids"].shape
    per_run = max(1, GRAD_TOKENS // (pairs * n_tokens) - 1)
    found, sums, at_clean = None, {}, {}
    for first in range(0, len(ks), per_run):
        alphas = torch.tensor(ks[first : first + per_run], dtype=torch.float64) / steps
        n = alphas.shape[0]
        batch = {
            k: torch.cat([v.repeat(n, *[1] * (v.dim() - 1)), corrupt_in[k]])
            for k, v in clean_in.items()
        }
        blend = {name: _blend(alphas, pairs) for name in embeds}
        sites = Sites(read=read if found is None else (), replace=blend, grad=grad)
        trace = net.run_with_sites(sites=sites, **batch)
        values = _metric_tensor(metric, trace, (n + 1) * pairs)
        if not values.requires_grad:
            raise ValueError(NO_GRADIENT)
        if found is None:  # the clean runs (k = steps) are the first block: they are read
            gaps = _gaps(net, clean_in, corrupt_in, metric, trace, values, n, pairs)
            clean_at = {k: v[:pairs].detach() for k, v in sites.values.items()}
            corrupt_at = {k: v[n * pairs :].detach() for k, v in sites.values.items()}
            found = (clean_at, corrupt_at, *gaps)
        w = torch.tensor(weights[first : first + per_run])
        for name, g in sites.gradients(values[: n * pairs]).items():
            blocks = g[: n * pairs].unflatten(0, (n, pairs))  # (n, N, ...)
            weighted = blocks * w.to(g).view(-1, *[1] * (blocks.dim() - 1))
            sums[name] = sums.get(name, 0) + weighted.sum(0)
            at_clean.setdefault(name, g[:pairs].detach())
    grads = {name: g / steps for name, g in sums.items()}
    return Gradients(found[0], found[1], grads, found[2], found[3], at_clean)


def _z_site(net: nn.Module, stack: str, layer: int) -> str:
    stream = "decoder" if stack == "cross" else stack
    attn = "cross_attn" if stack == "cross" else "attn"
    return f"{prefix(net.config, stream)}.{layer}.{attn}.hook_z"


def attribute_heads(
    net: nn.Module,
    clean: Mapping,
    corrupt: Mapping,
    metric: Metric,
    steps: int = 1,
    stack: str | None = None,
    ig_end: str = "clean",
) -> torch.Tensor:
    """Attribution patching of each head's context z (a first-order patch_heads).

    Args as analysis.patch_heads; steps: runs the gradient is averaged over (1: the clean run,
    EAP; more: EAP-IG); ig_end: "clean" (k = 1 … steps) or "corrupt" (k = 0 … steps − 1, the
    EAP-IG authors' loop). Returns [L, H]: Σ over positions and d_head of (z_clean − z_corrupt) ·
    mean ∂m/∂z, over (m_clean − m_corrupt); z = softmax(QKᵀ/√d_k)·V of the head before W_O.
    """
    name = stack_of(net, stack)
    names = [_z_site(net, name, layer) for layer in range(net.config.n_layers)]
    found = integrated(net, clean, corrupt, metric, steps, names, names, ig_end)
    return torch.stack([found.effect(n).sum((-2, -1)) for n in names]).float()  # (L, H)


def attribute_residual(
    net: nn.Module,
    clean: Mapping,
    corrupt: Mapping,
    metric: Metric,
    steps: int = 1,
    stack: str | None = None,
    ig_end: str = "clean",
) -> torch.Tensor:
    """Attribution patching of the stream entering each layer at each position (a first-order
    patch_residual). Args as attribute_heads; returns [L, T]."""
    stream = stack_of(net, "decoder" if stack == "cross" else stack)
    head = prefix(net.config, stream)
    names = [f"{head}.{layer}.hook_resid_pre" for layer in range(net.config.n_layers)]
    found = integrated(net, clean, corrupt, metric, steps, names, names, ig_end)
    return torch.stack([found.effect(n).sum(-1) for n in names]).float()  # (L, T)


@dataclass
class Attributed:
    """What one batched call of integrated runs estimates of a pair: every head's share with
    ``steps`` steps (EAP-IG) and with one (EAP: the clean run's gradient of the same runs),
    [L, H] each, and the stream entering each layer at each position with one step, [L, T]."""

    heads: torch.Tensor
    heads_one_step: torch.Tensor
    residual: torch.Tensor
    steps: int


def attribute_all(
    net: nn.Module,
    clean: Mapping,
    corrupt: Mapping,
    metric: Metric,
    steps: int,
    stack: str | None = None,
    ig_end: str = "clean",
) -> Attributed:
    """attribute_heads with ``steps`` (and ``ig_end``) and with one step, and attribute_residual
    with one step, from the same runs: the clean run is one of the integrated ones, so its
    gradient alone is the one-step estimate and costs nothing more (one call, not three)."""
    heads = [_z_site(net, stack_of(net, stack), layer) for layer in range(net.config.n_layers)]
    stream = stack_of(net, "decoder" if stack == "cross" else stack)
    head = prefix(net.config, stream)
    resid = [f"{head}.{layer}.hook_resid_pre" for layer in range(net.config.n_layers)]
    found = integrated(net, clean, corrupt, metric, steps, heads + resid, heads + resid, ig_end)

    def grid(names, one_step, dims):
        return torch.stack([found.effect(n, one_step).sum(dims) for n in names]).float()

    return Attributed(
        grid(heads, False, (-2, -1)), grid(heads, True, (-2, -1)), grid(resid, True, -1), steps
    )
