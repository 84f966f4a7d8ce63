"""Position-wise FFN, Add & Norm, and the encoder / decoder layers built of them (seed 000 §3-4)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

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

    def forward(self, x: torch.Tensor, sites: SiteView | None = None) -> torch.Tensor:
        """sites: the call's sites under "mlp." (model/sites.py), TransformerLens's names:
        "hook_pre" x W_1 + b_1 and "hook_post" act(x W_1 + b_1), each [B, T, d_ff]."""
        hidden = self.act(site(sites, "hook_pre", self.fc1(x)))  # (B, T, d_ff)
        return self.fc2(self.dropout(site(sites, "hook_post", hidden)))  # (B, T, d_model)


def make_mlp(config: TransformerConfig) -> nn.Module:
    """The config's MLP: the paper's FFN, or LLaMA's gated MLP (config.mlp)."""
    if config.mlp == "gated":
        return GatedFeedForward(config, ACTIVATION_MODULES[config.activation]())
    return PositionwiseFeedForward(config)


SubLayer = Callable[[torch.Tensor], tuple[torch.Tensor, dict]]

# The sites of each Add & Norm (model/sites.py): its norm's output, TransformerLens's
# "ln{n}.hook_normalized" (ln3 is the FFN's in a layer with cross-attention, as in
# TransformerLens's T5 block), and x + the sublayer's output (ours).
SELF_NORM = ("ln1.hook_normalized", "hook_attn_resid")
CROSS_NORM = ("ln2.hook_normalized", "hook_cross_attn_resid")
MLP_NORM = ("ln2.hook_normalized", "hook_mlp_resid")
MLP_NORM_AFTER_CROSS = ("ln3.hook_normalized", "hook_mlp_resid")


class AddNorm(nn.Module):
    """Residual connection around a sublayer, with the LayerNorm after it (post) or before it (pre).

    post (paper, seeds 000/002/003, BERT): out = LayerNorm(x + Dropout(sublayer(x)))
    pre  (seeds 001/004, GPT-2, LLaMA):    out = x + Dropout(sublayer(LayerNorm(x)))
    sandwich (Gemma 2 and 3):              out = x + Norm₂(sublayer(Norm(x)))
    The norm is an RMSNorm where config.norm_kind says so (LLaMA).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.pre = config.norm == "pre"
        self.norm = make_norm(config)
        self.post = make_norm(config) if config.sandwich_norm else None  # Gemma's second norm
        self.dropout = nn.Dropout(config.dropout)

    def after(self, sublayer: SubLayer, sites: SiteView | None, names: tuple[str, str]) -> SubLayer:
        """The sublayer followed by the second norm of a sandwich (Gemma's post_attention_ /
        post_feedforward_layernorm), its output at the site "ln1_post.hook_normalized" (ln2_post,
        …: TransformerLens's Gemma 2 names); the sublayer itself where there is none. What the
        sublayer's output site (hook_attn_out) then sees is the normed output, as there; the
        sublayer's own output, what the second norm reads, is at "ln1_post.hook_in" (ours)."""
        if self.post is None:
            return sublayer
        name = names[0].replace(".", "_post.", 1)
        raw = name.replace("hook_normalized", "hook_in")

        def run(h: torch.Tensor) -> tuple[torch.Tensor, dict]:
            out, found = sublayer(h)
            out = site(sites, raw, out)  # (B, T, d_model) before the second norm
            return site(sites, name, self.post(out)), found  # (B, T, d_model)

        return run

    def sublayer_input(self, x: torch.Tensor) -> torch.Tensor:
        """What the sublayer reads: LayerNorm(x) when pre-norm, x itself when post-norm."""
        return self.norm(x) if self.pre else x

    def forward(
        self,
        x: torch.Tensor,
        sublayer: SubLayer,
        sites: SiteView | None = None,
        names: tuple[str, str] = SELF_NORM,
        read: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, dict]:
        """Returns (new residual stream, the sublayer's own output, what the sublayer found).

        sites: the call's sites under the layer (model/sites.py), at ``names``: the norm's
        output ("ln1.hook_normalized": what the sublayer reads when pre-norm, the new stream
        when post-norm) and x + the sublayer's output ("hook_attn_resid", before a post-norm's
        norm). read: what the sublayer reads in place of x (a site); the residual connection
        still adds x.
        """
        h = x if read is None else read(x)
        if self.pre:
            h = site(sites, names[0], self.norm(h))  # (B, T, d_model)
        out, found = sublayer(h)
        residual = site(sites, names[1], x + self.dropout(out))  # (B, T, d_model)
        if self.pre:
            return residual, out, found
        return site(sites, names[0], self.norm(residual)), out, found


def band(mask: torch.Tensor | None, window: int, x: torch.Tensor) -> torch.Tensor:
    """A local layer's mask: the stack's [B, T_q, T_k] mask (None: every key of a causal pass
    of one token) and the band of the last ``window`` keys of each query, the queries being
    the last T_q of the T_k slots (a whole text: T_q = T_k)."""
    t_q = x.shape[1]
    t_k = t_q if mask is None else mask.shape[-1]
    query = torch.arange(t_k - t_q, t_k, device=x.device)  # (T_q,) each query's slot
    keys = torch.arange(t_k, device=x.device)  # (T_k,)
    inside = keys[None, :] > query[:, None] - window  # (T_q, T_k): HF's sliding_window_overlay
    return inside if mask is None else mask & inside


def _sited(sublayer: SubLayer, sites: SiteView | None, name: str) -> SubLayer:
    """The sublayer with its output through the call's site ``name`` (model/sites.py)."""
    if sites is None or not sites.wants(name):
        return sublayer

    def run(h: torch.Tensor) -> tuple[torch.Tensor, dict]:
        out, found = sublayer(h)
        return sites(name, out), found

    return run


def _split_inputs(
    sites: SiteView | None,
    attn: MultiHeadAttention,
    add_norm: AddNorm,
    x: torch.Tensor,
    memory: torch.Tensor | None = None,
) -> dict[str, torch.Tensor] | None:
    """Where the call names hook_q_input / hook_k_input / hook_v_input, each head's own copy of
    the stream x its attention reads, through the layer's norm (TransformerLens's split qkv
    input): {"q" | "k" | "v": [B, heads, T, d_model]}; None when it names none. For cross-
    attention (``memory``, the encoder's output) the names are hook_cross_q_input (copies of
    x, through the norm) and hook_cross_k_input / hook_cross_v_input: copies of the memory,
    which its keys and values read as it is."""
    if sites is None:
        return None
    inputs = {}
    for kind in ("q", "k", "v"):
        name = f"hook_{kind}_input" if memory is None else f"hook_cross_{kind}_input"
        if sites.wants(name):
            source = x if kind == "q" or memory is None else memory  # (B, T, d_model)
            batch, seq_len, d_model = source.shape
            heads = attn.n_heads if kind == "q" else attn.n_heads // attn.n_rep
            copies = source.unsqueeze(1).expand(batch, heads, seq_len, d_model)
            copies = sites(name, copies)  # (B, heads, T, d_model)
            inputs[kind] = add_norm.sublayer_input(copies) if source is x else copies
    return inputs or None


def _under(sites: SiteView | None, name: str) -> SiteView | None:
    """The call's sites under a sublayer ("attn.", "cross_attn."), or None."""
    return None if sites is None else sites.at(name)


def _mlp(
    ffn: nn.Module,
    add_norm: AddNorm,
    x: torch.Tensor,
    sites: SiteView | None,
    names: tuple[str, str],
) -> tuple[torch.Tensor, torch.Tensor]:
    """The FFN's Add & Norm, with the call's hook_mlp_in, mlp.* and hook_mlp_out sites:
    (the new stream, the FFN's output)."""
    read = None if sites is None else (lambda x: sites("hook_mlp_in", x))
    inner = _under(sites, "mlp.")
    sublayer = add_norm.after(lambda h: (ffn(h, inner), {}), sites, names)
    sublayer = _sited(sublayer, sites, "hook_mlp_out")
    x, out, _ = add_norm(x, sublayer, sites, names, read)
    return x, out


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
    ) -> tuple[torch.Tensor, dict]:
        """sites: the call's sites under this layer ("blocks.{l}.", model/sites.py), which read
        or replace every intermediate (the layer walk reads them all); rotary: the text's RoPE
        angles when the model turns queries and keys. Returns the new stream and {"self": the
        attention's q, k, v, scores, pattern; "attn_out", "mlp_out"} (what a trace replays)."""
        x = site(sites, "hook_resid_pre", x)
        attn = _under(sites, "attn.")
        inputs = _split_inputs(sites, self.self_attn, self.add_norm1, x)
        attend = self.add_norm1.after(
            lambda h: self.self_attn(h, h, mask, attn, rotary, inputs), sites, SELF_NORM
        )
        x, attn_out, self_found = self.add_norm1(
            x, _sited(attend, sites, "hook_attn_out"), sites, SELF_NORM
        )
        x = site(sites, "hook_resid_mid", x)
        x, mlp_out = _mlp(self.ffn, self.add_norm2, x, sites, MLP_NORM)
        found = {"self": self_found, "attn_out": attn_out, "mlp_out": mlp_out}
        return site(sites, "hook_resid_post", x), found


class DecoderLayer(nn.Module):
    """Masked self-attention -> Add & Norm -> [cross-attention -> Add & Norm] -> FFN -> Add & Norm.

    Cross-attention takes Q from the decoder and K, V from the encoder output (seed 000 §4); a
    decoder-only model (GPT-style) has no cross-attention. A sliding layer among full ones
    (Gemma 3's local layers, ``config.is_local``) sees only the band of the last sliding_window
    keys and turns its queries and keys by the local RoPE base.
    """

    def __init__(self, config: TransformerConfig, cross: bool, index: int = 0) -> None:
        super().__init__()
        self.window = config.sliding_window if config.is_local(index) else None
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
    ) -> tuple[torch.Tensor, dict]:
        """sites as EncoderLayer (cross-attention's under "cross_attn.", the stream after it
        "hook_resid_mid_cross"); self_mask: [B, T_q, T_k], or {"full": …, "local": …} (a cached
        continuation of a model with local layers, whose slots are not positions); rotary: the
        text's RoPE angles, for self-attention (cross-attention is never turned). Returns as
        EncoderLayer, with "cross" and "cross_out"."""
        x = site(sites, "hook_resid_pre", x)
        if isinstance(self_mask, Mapping):  # a cached continuation's masks, one per kind
            self_mask = self_mask["full" if self.window is None else "local"]
        elif self.window is not None:  # a local layer: its band of keys
            self_mask = band(self_mask, self.window, x)
        if self.window is not None and rotary is not None and rotary.local is not None:
            rotary = rotary.local  # a local layer's own RoPE base
        attn = _under(sites, "attn.")
        inputs = _split_inputs(sites, self.self_attn, self.add_norm1, x)
        attend = self.add_norm1.after(
            lambda h: self.self_attn(h, h, self_mask, attn, rotary, inputs), sites, SELF_NORM
        )
        x, attn_out, self_found = self.add_norm1(
            x, _sited(attend, sites, "hook_attn_out"), sites, SELF_NORM
        )
        x = site(sites, "hook_resid_mid", x)
        found = {"self": self_found, "attn_out": attn_out}
        mlp_names = MLP_NORM
        if self.cross_attn is not None:
            if memory is None:
                raise ValueError("This decoder layer has cross-attention: pass the encoder output.")
            cross = _under(sites, "cross_attn.")
            split = _split_inputs(sites, self.cross_attn, self.add_norm2, x, memory)
            cross_attend = self.add_norm2.after(
                lambda h: self.cross_attn(h, memory, cross_mask, cross, None, split),
                sites,
                CROSS_NORM,
            )
            x, cross_out, cross_found = self.add_norm2(
                x, _sited(cross_attend, sites, "hook_cross_attn_out"), sites, CROSS_NORM
            )
            x = site(sites, "hook_resid_mid_cross", x)
            found.update(cross=cross_found, cross_out=cross_out)
            mlp_names = MLP_NORM_AFTER_CROSS
        x, found["mlp_out"] = _mlp(self.ffn, self.add_norm3, x, sites, mlp_names)
        return site(sites, "hook_resid_post", x), found
