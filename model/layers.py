"""Position-wise FFN, Add & Norm, and the encoder / decoder layers built of them (seed 000 §3-4)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from model.attention import MultiHeadAttention
from model.config import TransformerConfig
from model.gated_mlp import GatedFeedForward
from model.norms import make_norm
from model.rotary import Rotation
from model.sites import SiteView, site

ACTIVATION_MODULES: dict[str, Callable[[], nn.Module]] = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,  # exact erf form, as BERT's "gelu"
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),  # GPT-2's "gelu_new"
    "silu": nn.SiLU,  # x·σ(x), LLaMA's gate
}


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, applied to every position alone.

    Seed 003 writes it as two Conv1d(kernel_size=1); a 1x1 convolution over the sequence is this
    same Linear applied per position (tests/test_modules.py proves it numerically).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.d_ff, bias=config.mlp_bias)
        self.act = ACTIVATION_MODULES[config.activation]()
        self.dropout = nn.Dropout(config.dropout)
        self.fc2 = nn.Linear(config.d_ff, config.d_model, bias=config.mlp_bias)

    def forward(self, x: torch.Tensor, record: dict | None = None) -> torch.Tensor:
        """record: optional {} that gets "hidden", act(x W_1 + b_1) [B, T, d_ff]."""
        hidden = self.act(self.fc1(x))  # (B, T, d_ff)
        if record is not None:
            record["hidden"] = hidden
        return self.fc2(self.dropout(hidden))  # (B, T, d_model)


def make_mlp(config: TransformerConfig) -> nn.Module:
    """The config's MLP: the paper's FFN, or LLaMA's gated MLP (config.mlp)."""
    if config.mlp == "gated":
        return GatedFeedForward(config, ACTIVATION_MODULES[config.activation]())
    return PositionwiseFeedForward(config)


SubLayer = Callable[[torch.Tensor], tuple[torch.Tensor, dict]]


class AddNorm(nn.Module):
    """Residual connection around a sublayer, with the LayerNorm after it (post) or before it (pre).

    post (paper, seeds 000/002/003, BERT): out = LayerNorm(x + Dropout(sublayer(x)))
    pre  (seeds 001/004, GPT-2, LLaMA):    out = x + Dropout(sublayer(LayerNorm(x)))
    The norm is an RMSNorm where config.norm_kind says so (LLaMA).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.pre = config.norm == "pre"
        self.norm = make_norm(config)
        self.dropout = nn.Dropout(config.dropout)

    def sublayer_input(self, x: torch.Tensor) -> torch.Tensor:
        """What the sublayer reads: LayerNorm(x) when pre-norm, x itself when post-norm."""
        return self.norm(x) if self.pre else x

    def forward(
        self,
        x: torch.Tensor,
        sublayer: SubLayer,
        record: dict | None = None,
        read: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, dict]:
        """Returns (new residual stream, the sublayer's own output, the sublayer's record).

        record: optional {} that gets "input" (what the sublayer read: LayerNorm(x) when
        pre-norm), "residual" (x + the sublayer's output) and "output" (the new stream).
        read: what the sublayer reads in place of x (a site, model/sites.py); the residual
        connection still adds x.
        """
        h = self.sublayer_input(x if read is None else read(x))  # (B, T, d_model)
        out, found = sublayer(h)
        residual = x + self.dropout(out)  # (B, T, d_model)
        new = residual if self.pre else self.norm(residual)
        if record is not None:
            record.update(input=h, residual=residual, output=new)
        return new, out, found


def _ffn(ffn: nn.Module, record: bool) -> SubLayer:
    """The FFN as a sublayer; with ``record``, its record holds its hidden features."""
    if not record:
        return lambda h: (ffn(h), {})

    def run(h: torch.Tensor) -> tuple[torch.Tensor, dict]:
        found: dict = {}
        return ffn(h, found), found

    return run


def _sited(sublayer: SubLayer, sites: SiteView | None, name: str) -> SubLayer:
    """The sublayer with its output through the call's site ``name`` (model/sites.py)."""
    if sites is None or not sites.wants(name):
        return sublayer

    def run(h: torch.Tensor) -> tuple[torch.Tensor, dict]:
        out, found = sublayer(h)
        return sites(name, out), found

    return run


def _split_inputs(
    sites: SiteView | None, attn: MultiHeadAttention, add_norm: AddNorm, x: torch.Tensor
) -> dict[str, torch.Tensor] | None:
    """Where the call names hook_q_input / hook_k_input / hook_v_input, each head's own copy of
    the stream x its attention reads, through the layer's norm (TransformerLens's split qkv
    input): {"q" | "k" | "v": [B, heads, T, d_model]}; None when it names none."""
    if sites is None:
        return None
    inputs = {}
    batch, seq_len, d_model = x.shape
    for kind in ("q", "k", "v"):
        name = f"hook_{kind}_input"
        if sites.wants(name):
            heads = attn.n_heads if kind == "q" else attn.n_heads // attn.n_rep
            copies = x.unsqueeze(1).expand(batch, heads, seq_len, d_model)  # (B, heads, T, d)
            inputs[kind] = add_norm.sublayer_input(sites(name, copies))
    return inputs or None


def _under(sites: SiteView | None, name: str) -> SiteView | None:
    """The call's sites under a sublayer ("attn.", "cross_attn."), or None."""
    return None if sites is None else sites.at(name)


def _mlp(
    ffn: nn.Module, add_norm: AddNorm, x: torch.Tensor, sites: SiteView | None, seen: dict | None
) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """The FFN's Add & Norm, with the call's hook_mlp_in and hook_mlp_out sites."""
    read = None if sites is None else (lambda x: sites("hook_mlp_in", x))
    sublayer = _sited(_ffn(ffn, seen is not None), sites, "hook_mlp_out")
    return add_norm(x, sublayer, _norm_record(seen, "mlp_norm"), read)


def _norm_record(record: dict | None, name: str) -> dict | None:
    """The record of one Add & Norm ("self_norm", "cross_norm", "mlp_norm"), when recording."""
    return None if record is None else record.setdefault(name, {})


class EncoderLayer(nn.Module):
    """Multi-head self-attention -> Add & Norm -> FFN -> Add & Norm."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(config)
        self.add_norm1 = AddNorm(config)
        self.ffn = make_mlp(config)
        self.add_norm2 = AddNorm(config)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        sites: SiteView | None = None,
        rotary: Rotation | None = None,
        record: bool = False,
    ) -> tuple[torch.Tensor, dict]:
        """sites: the call's sites under this layer ("blocks.{l}.", model/sites.py); rotary: the
        text's RoPE angles when the model turns queries and keys; record: every intermediate
        back (the Add & Norms' "self_norm" and "mlp_norm", the FFN's "mlp", the attention's)."""
        seen = {} if record else None
        x = site(sites, "hook_resid_pre", x)
        attn = _under(sites, "attn.")
        inputs = _split_inputs(sites, self.self_attn, self.add_norm1, x)
        attn_rec = {} if record else None
        x, attn_out, self_rec = self.add_norm1(
            x,
            _sited(
                lambda h: self.self_attn(h, h, mask, attn, rotary, inputs, attn_rec),
                sites,
                "hook_attn_out",
            ),
            _norm_record(seen, "self_norm"),
        )
        x = site(sites, "hook_resid_mid", x)
        x, mlp_out, mlp_rec = _mlp(self.ffn, self.add_norm2, x, sites, seen)
        found = {"self": self_rec, "attn_out": attn_out, "mlp_out": mlp_out}
        if seen is not None:
            found.update(seen, mlp=mlp_rec)
        return site(sites, "hook_resid_post", x), found


class DecoderLayer(nn.Module):
    """Masked self-attention -> Add & Norm -> [cross-attention -> Add & Norm] -> FFN -> Add & Norm.

    Cross-attention takes Q from the decoder and K, V from the encoder output (seed 000 §4); a
    decoder-only model (GPT-style) has no cross-attention.
    """

    def __init__(self, config: TransformerConfig, cross: bool) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(config)
        self.add_norm1 = AddNorm(config)
        self.cross_attn = MultiHeadAttention(config) if cross else None
        self.add_norm2 = AddNorm(config) if cross else None
        self.ffn = make_mlp(config)
        self.add_norm3 = AddNorm(config)

    def forward(
        self,
        x: torch.Tensor,
        self_mask: torch.Tensor | None,
        memory: torch.Tensor | None = None,
        cross_mask: torch.Tensor | None = None,
        sites: SiteView | None = None,
        rotary: Rotation | None = None,
        record: bool = False,
    ) -> tuple[torch.Tensor, dict]:
        """sites, record as EncoderLayer (with "cross_norm", and cross-attention's sites under
        "cross_attn."); rotary: the text's RoPE angles, for self-attention (cross-attention is
        never turned)."""
        seen = {} if record else None
        x = site(sites, "hook_resid_pre", x)
        attn = _under(sites, "attn.")
        inputs = _split_inputs(sites, self.self_attn, self.add_norm1, x)
        attn_rec = {} if record else None
        x, attn_out, self_rec = self.add_norm1(
            x,
            _sited(
                lambda h: self.self_attn(h, h, self_mask, attn, rotary, inputs, attn_rec),
                sites,
                "hook_attn_out",
            ),
            _norm_record(seen, "self_norm"),
        )
        x = site(sites, "hook_resid_mid", x)
        found = {"self": self_rec, "attn_out": attn_out}
        if self.cross_attn is not None:
            if memory is None:
                raise ValueError("This decoder layer has cross-attention: pass the encoder output.")
            cross = _under(sites, "cross_attn.")
            cross_rec = {} if record else None
            x, cross_out, cross_found = self.add_norm2(
                x,
                _sited(
                    lambda h: self.cross_attn(h, memory, cross_mask, cross, None, None, cross_rec),
                    sites,
                    "hook_cross_attn_out",
                ),
                _norm_record(seen, "cross_norm"),
            )
            found.update(cross=cross_found, cross_out=cross_out)
        x, mlp_out, mlp_rec = _mlp(self.ffn, self.add_norm3, x, sites, seen)
        found["mlp_out"] = mlp_out
        if seen is not None:
            found.update(seen, mlp=mlp_rec)
        return site(sites, "hook_resid_post", x), found
