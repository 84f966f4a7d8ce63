"""One frozen config for every Transformer family the seed tutorials build; a table of presets."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Literal

from lang import Msg
from model.tokenizers import CharTokenizer

Arch = Literal["encoder", "decoder", "encoder-decoder"]
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
# How the model knows where a token is: a vector added to the embedding (sinusoidal, learned), a
# rotation of each head's queries and keys (rotary: RoPE, Su et al. 2021; LLaMA), or not at all.
POSITIONS = ("sinusoidal", "learned", "rotary", "none")


@dataclass(frozen=True)
class TransformerConfig:
    """Hyper-parameters of one model; validated on construction, never mutated."""

    name: str = "custom"
    arch: Arch = "encoder"
    vocab_size: int = CharTokenizer.vocab_size
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = (
        2  # per stack: an encoder-decoder has n_layers encoder and n_layers decoder layers
    )
    d_ff: int = 256
    max_len: int = 512
    norm: Literal["post", "pre"] = (
        "post"  # post: LN(x + f(x)) (paper); pre: x + f(LN(x)) (seed 001)
    )
    activation: Literal["relu", "gelu", "gelu_tanh", "silu"] = "relu"
    positions: Literal["sinusoidal", "learned", "rotary", "none"] = "sinusoidal"
    type_vocab_size: int = 0  # BERT's segment (token-type) embeddings; 0 = none
    embedding_norm: bool = False  # LayerNorm after the embedding sum (BERT, seed 004)
    layer_norm_eps: float = 1e-5
    dropout: float = 0.1  # only active in train(); trace() always runs in eval semantics
    lm_head: bool = False  # Linear(d_model, vocab_size) on the last stack (seed 000, seed 001)
    lm_head_bias: bool = True  # seed 000 uses nn.Linear's bias; seed 001 uses bias=False
    pooler: bool = False  # BERT's tanh(W·h[CLS]) pooler, present when a checkpoint carries it
    # A LayerNorm at the end of each stack. None follows the norm: pre-norm -> True (seed 001's
    # Encoder/Decoder end with self.norm), post-norm -> False (the paper, BERT: each layer ends
    # with its own LayerNorm already). Seed 004's pre-norm TransformerEncoder has none: False.
    final_norm: bool | None = None
    # Label names of a per-token classifier, Linear(d_model, len(token_labels)) on the last
    # stack's output (a tagger, like BERT's token classification head); () = no such head.
    token_labels: tuple[str, ...] = ()
    pad_id: int = 0
    seed: int = 0  # seeds the random initialisation: same seed, same weights, same figures
    # ---- the language-model families (GPT-2, LLaMA, Qwen2, Mistral; model/checkpoint.py) --
    norm_kind: Literal["layer", "rms"] = "layer"  # rms: x / RMS(x) · g, no mean, no bias (LLaMA)
    rope_theta: float = 10000.0  # RoPE base: pair i of a head turns by pos · θ^(−2i/d_head)
    # LLaMA 3.1+'s RoPE scaling (factor, low_freq_factor, high_freq_factor, original context):
    # slow pairs turn `factor` times slower, fast ones as before, a smooth blend between.
    rope_llama3: tuple[float, float, float, int] | None = None
    # Key/value heads: None = n_heads (multi-head); fewer = grouped-query attention, where query
    # head h reads key/value head h // (n_heads / n_kv_heads) (LLaMA's repeat_kv); 1 = multi-query.
    n_kv_heads: int | None = None
    mlp: Literal["ffn", "gated"] = "ffn"  # gated: W_down(act(x W_gate) * (x W_up)) (LLaMA)
    attn_bias: bool = True  # biases of W_Q, W_K, W_V (GPT-2, BERT, Qwen2: yes; LLaMA: no)
    attn_out_bias: bool = True  # bias of W_O (GPT-2, BERT: yes; LLaMA, Qwen2: no)
    mlp_bias: bool = True  # biases of the MLP's linears (GPT-2: yes; LLaMA: no)
    tie_lm_head: bool = False  # the LM head reuses the token embedding matrix (GPT-2)
    # Mistral: a query sees only the last sliding_window keys (itself included); None = all.
    sliding_window: int | None = None
    # ---- Gemma 3 (and Qwen3's QK-norm) -----------------------------------------------------------
    # Per-layer attention kinds, HF's names: "sliding_attention" layers see the band of
    # sliding_window keys and turn by rope_local_theta, "full_attention" layers see every earlier
    # key and turn by rope_theta. () = every layer alike (the band everywhere when sliding_window).
    layer_types: tuple[str, ...] = ()
    rope_local_theta: float | None = None  # RoPE base of the sliding layers; None = rope_theta
    head_dim: int | None = None  # d_head when it is not d_model / n_heads (Gemma 3: 256 of 640)
    qk_norm: bool = False  # an RMSNorm over d_head on every query and key head before RoPE
    sandwich_norm: bool = False  # a second norm on each sublayer's output, before the residual add
    norm_offset: bool = False  # RMSNorm's gain is 1 + w (Gemma stores w around 0)
    embed_scale: bool = False  # token embeddings multiplied by √d_model (Gemma)
    source: str = ""  # which seed tutorial (or checkpoint) this config follows

    def __post_init__(self) -> None:
        if self.final_norm is None:
            object.__setattr__(self, "final_norm", self.norm == "pre")
        if isinstance(self.token_labels, list):  # read back from JSON
            object.__setattr__(self, "token_labels", tuple(self.token_labels))
        if isinstance(self.rope_llama3, list):
            object.__setattr__(self, "rope_llama3", tuple(self.rope_llama3))
        if isinstance(self.layer_types, list):
            object.__setattr__(self, "layer_types", tuple(self.layer_types))
        positive = ["vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len"]
        optional = ("n_kv_heads", "sliding_window", "head_dim")
        positive += [n for n in optional if getattr(self, n) is not None]
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(
                    Msg(
                        "{name} must be a positive integer, not {value}.",
                        name=name,
                        value=repr(value),
                    )
                )
        if self.head_dim is None and self.d_model % self.n_heads:
            raise ValueError(
                Msg(
                    "d_model ({d_model}) must be divisible by n_heads ({n_heads}): each head gets "
                    "d_model / n_heads dimensions.",
                    d_model=self.d_model,
                    n_heads=self.n_heads,
                )
            )
        choices = {
            "arch": ("encoder", "decoder", "encoder-decoder"),
            "norm": ("post", "pre"),
            "activation": ACTIVATIONS,
            "positions": POSITIONS,
            "norm_kind": ("layer", "rms"),
            "mlp": ("ffn", "gated"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    Msg(
                        "{name} must be one of {allowed}, not {value}.",
                        name=name,
                        allowed=", ".join(map(repr, allowed)),
                        value=repr(getattr(self, name)),
                    )
                )
        if self.positions == "sinusoidal" and self.d_model % 2:
            raise ValueError(
                Msg(
                    "sinusoidal positions pair sin and cos dimensions: d_model ({d_model}) must "
                    "be even.",
                    d_model=self.d_model,
                )
            )
        if self.n_heads % self.kv_heads:
            raise ValueError(
                f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.kv_heads}): "
                "each key/value head serves the same number of query heads."
            )
        if self.positions == "rotary" and self.d_head % 2:
            raise ValueError(
                f"rotary positions turn pairs of dimensions: d_head ({self.d_head}) must be even."
            )
        theta = self.rope_theta
        if isinstance(theta, bool) or not isinstance(theta, int | float) or not theta > 1:
            raise ValueError(f"rope_theta must be a number above 1, not {theta!r}.")
        scaling = self.rope_llama3
        if scaling is not None and not (
            len(scaling) == 4
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in scaling)
            and min(scaling) > 0
            and scaling[2] > scaling[1]
        ):
            raise ValueError(
                "rope_llama3 must be (factor, low_freq_factor, high_freq_factor, original "
                f"context), positive, high above low; not {scaling!r}."
            )
        if self.tie_lm_head and not self.lm_head:
            raise ValueError("tie_lm_head ties the LM head to the embedding: set lm_head=True.")
        if self.sliding_window is not None and self.arch != "decoder":
            raise ValueError("sliding_window is a decoder-only (Mistral) attention band.")
        self._check_layer_types()
        if self.type_vocab_size < 0:
            raise ValueError(
                Msg("type_vocab_size must be >= 0, not {value}.", value=self.type_vocab_size)
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(Msg("dropout must be in [0, 1), not {value}.", value=self.dropout))
        if not self.layer_norm_eps > 0:
            raise ValueError(
                Msg("layer_norm_eps must be positive, not {value}.", value=self.layer_norm_eps)
            )
        if not isinstance(self.final_norm, bool):
            raise ValueError(
                Msg(
                    "final_norm must be True, False or None, not {value}.",
                    value=repr(self.final_norm),
                )
            )
        labels = self.token_labels
        if not all(isinstance(x, str) for x in labels) or len(set(labels)) != len(labels):
            raise ValueError(
                Msg("token_labels must be distinct strings, not {value}.", value=repr(labels))
            )
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(
                Msg(
                    "pad_id {pad_id} is outside the vocabulary of {vocab_size}.",
                    pad_id=self.pad_id,
                    vocab_size=self.vocab_size,
                )
            )

    def _check_layer_types(self) -> None:
        """layer_types: one of HF's two kinds per layer, and only with a sliding window."""
        kinds = ("sliding_attention", "full_attention")
        if not self.layer_types:
            return
        if len(self.layer_types) != self.n_layers or set(self.layer_types) - set(kinds):
            raise ValueError(
                f"layer_types must give each of the {self.n_layers} layers one of {kinds}, "
                f"not {self.layer_types!r}."
            )
        if self.sliding_window is None and "sliding_attention" in self.layer_types:
            raise ValueError("sliding_attention layers need a sliding_window.")
        local = self.rope_local_theta
        if local is not None and (
            isinstance(local, bool) or not isinstance(local, int | float) or not local > 1
        ):
            raise ValueError(f"rope_local_theta must be a number above 1, not {local!r}.")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    @property
    def d_attn(self) -> int:
        """Width of the heads side by side, n_heads · d_head: what W_Q makes and W_O reads
        (d_model, except where head_dim says otherwise)."""
        return self.n_heads * self.d_head

    def is_local(self, layer: int) -> bool:
        """Whether layer ``layer`` is a sliding-window layer among full ones (Gemma 3); a model
        whose every layer has the band (Mistral) has it in the stack's mask instead."""
        return bool(self.layer_types) and self.layer_types[layer] == "sliding_attention"

    @property
    def kv_heads(self) -> int:
        """Key/value heads per layer: n_kv_heads, or n_heads when it is None."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    def kv_head_of(self, head: int) -> int:
        """The key/value head query head ``head`` reads (itself without grouped-query attention)."""
        return head // (self.n_heads // self.kv_heads)

    @property
    def has_encoder(self) -> bool:
        return self.arch in ("encoder", "encoder-decoder")

    @property
    def has_decoder(self) -> bool:
        return self.arch in ("decoder", "encoder-decoder")

    @property
    def stacks(self) -> tuple[str, ...]:
        """This model's attention stacks in the order data flows through them: "encoder",
        "decoder" (masked self-attention), "cross" (decoder queries over encoder keys)."""
        return {
            "encoder": ("encoder",),
            "decoder": ("decoder",),
            "encoder-decoder": ("encoder", "decoder", "cross"),
        }[self.arch]

    @property
    def first_stack(self) -> str:
        """The stack that reads the input text."""
        return self.stacks[0]

    @property
    def last_stream(self) -> str:
        """The residual stream the model's output is read from."""
        return "decoder" if self.has_decoder else "encoder"

    def replace(self, **changes) -> TransformerConfig:
        """A copy with some fields changed (validated again); a new norm re-derives final_norm."""
        if changes.get("norm", self.norm) != self.norm and "final_norm" not in changes:
            changes["final_norm"] = None
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# One preset per seed tutorial (seed 000 to seed 004, the five tutorials docs/models.md names), at
# paper size where the seed uses it, plus small variants that trace in milliseconds on a laptop
# CPU. All use the character tokenizer's vocabulary.
# Columns: _COLUMNS, then the other fields that differ from the defaults, then the source.
# fmt: off
_TABLE = [
    ("seed000-transformer", "encoder-decoder", 512, 8, 6, 2048, "post", "relu", "sinusoidal",
     {"layer_norm_eps": 1e-12, "lm_head": True},
     "seed 000: the paper's Transformer (post-norm, 512/8/6/2048, ReLU, sinusoidal PE, "
     "LayerNorm eps 1e-12, decoder Linear with bias)"),
    ("seed000-tiny", "encoder-decoder", 64, 4, 2, 256, "post", "relu", "sinusoidal",
     {"layer_norm_eps": 1e-12, "lm_head": True},
     "seed 000 at 64/4/2/256: same architecture, small enough for instant traces"),
    ("seed001-prenorm", "encoder-decoder", 128, 4, 2, 128, "pre", "relu", "sinusoidal",
     {"final_norm": True, "lm_head": True, "lm_head_bias": False},
     "seed 001 (Happy-LLM): pre-norm encoder-decoder, each stack ends with a LayerNorm, "
     "FFN MLP(dim, dim) with ReLU (d_ff = d_model), lm_head Linear without bias"),
    ("seed001-decoder", "decoder", 128, 4, 4, 128, "pre", "relu", "sinusoidal",
     {"final_norm": True, "lm_head": True, "lm_head_bias": False},
     "seed 001's pre-norm decoder used alone (GPT-style, seed 004's 'pure decoder'): "
     "masked self-attention + ReLU FFN of d_ff = d_model, final LayerNorm, lm_head"),
    ("seed002-encoder", "encoder", 128, 8, 2, 512, "post", "relu", "sinusoidal",
     {},
     "seed 002: character-level encoder, sinusoidal PE, post-norm Add & Norm, ReLU FFN"),
    ("seed003-encdec", "encoder-decoder", 128, 8, 2, 512, "post", "relu", "sinusoidal",
     {"layer_norm_eps": 1e-5, "lm_head": True},
     "seed 003: post-norm encoder-decoder whose FFN is conv1d(k=1) (the same function as two "
     "Linear layers), padding / causal / cross masks"),
    ("seed004-encoder", "encoder", 128, 4, 2, 512, "pre", "gelu", "learned",
     {"embedding_norm": True, "layer_norm_eps": 1e-12, "final_norm": False},
     "seed 004: BERT-style pre-norm encoder with learned positions, embedding LayerNorm, "
     "GELU FFN of 4 x d_model, no final LayerNorm (its TransformerEncoder ends with the layers)"),
]
# fmt: on
_COLUMNS = (
    "name",
    "arch",
    "d_model",
    "n_heads",
    "n_layers",
    "d_ff",
    "norm",
    "activation",
    "positions",
)
PRESETS: dict[str, TransformerConfig] = {
    row[0]: TransformerConfig(**dict(zip(_COLUMNS, row[:9], strict=True)), **row[9], source=row[10])
    for row in _TABLE
}
