"""What each step of a layer does, in one English sentence (analysis.layer_steps gives it to
every Step; the page shows it on the step's card, ``lang.tr(step.note)``).

A note is a ``lang.Msg``: English text that remembers its pattern, so the card says it in the
reader's language. The Chinese is in ui/zh_CN.json, the one table of our words, under each
English sentence (or pattern, with its {fields}); there the names a Chinese sentence keeps in
English (Pre-norm, d_model, a tensor's name) are marked as code, `d_model`.
"""

from __future__ import annotations

from lang import Msg

# ---- notes ----------------------------------------------------------------------------------
SAID: dict[str, str] = {
    "input": "The residual stream entering this layer: one d_model vector per token.",
    "LayerNorm before self-attention": (
        "Pre-norm: each token's vector is normalised before the masked self-attention reads it."
    ),
    "self-attention output": (
        "The masked self-attention sublayer (taken apart under the decoder stack), one vector a "
        "token."
    ),
    "self-attention residual": (
        "Residual connection: the self-attention output added to the layer's input."
    ),
    "LayerNorm after self-attention": (
        "Post-norm: Add & Norm normalises each token's sum (mean 0, variance 1, then γ and β)."
    ),
    "LayerNorm before attention": (
        "Pre-norm: each token's vector is normalised before the attention reads it; the residual "
        "keeps the un-normalised one."
    ),
    "RMSNorm before attention": (
        "Pre-norm with RMSNorm (LLaMA): each token's vector is divided by its root mean square "
        "and scaled by g, no mean taken away and no bias; the residual keeps the un-normalised "
        "one."
    ),
    "Q": "Queries: what each token is looking for, one linear map of its vector.",
    "K": "Keys: what each token offers to be found by.",
    "V": "Values: what each token passes on when it is attended to.",
    "Q heads": "Q cut into H heads of d_k dimensions each; every head attends on its own.",
    "K heads": "K cut into the same H heads.",
    "V heads": "V cut into the same H heads.",
    "QK-norm on Q": (
        "QK-norm: each query head is divided by its root mean square over its d_k dimensions and "
        "scaled by its own learned gain (q_norm), before RoPE turns it: the scores stay bounded."
    ),
    "QK-norm on K": (
        "The key heads normalised the same way, by their own gain (k_norm), before they are "
        "turned and shared."
    ),
    "RoPE on Q": (
        "Rotary positions (RoPE): each head's query is turned pair of dimensions by pair, by an "
        "angle its position m times θ_i; nothing was added to the embedding."
    ),
    "RoPE on K": (
        "The keys turned the same way: the score of query m and key n then depends on m − n "
        "alone, the tokens' offset."
    ),
    "K heads repeated": (
        "Grouped-query attention: each key head is shared by a group of query heads, so it is "
        "repeated once for each query head of its group."
    ),
    "V heads repeated": (
        "The value heads repeated the same way: query head h reads value head h // (H / H_kv)."
    ),
    "scores": (
        "Every query against every key, per head, scaled by 1/√d_k so the softmax stays soft."
    ),
    "attention weights": (
        "Softmax over the keys: each row sums to 1 and says how much each key is read."
    ),
    "context": "Each head's weighted sum of the value vectors: what the token gathers.",
    "concat": "The heads' contexts side by side again: back to one d_model vector per token.",
    "attention output": (
        "The output projection W_O mixes the heads: the attention sublayer's output."
    ),
    "RMSNorm on attention output": (
        "Gemma's sandwich: the attention's output is normalised once more "
        "(post_attention_layernorm) before the residual connection adds it."
    ),
    "attention residual": (
        "Residual connection: the attention output added to the vector it started from."
    ),
    "LayerNorm after attention": (
        "Post-norm: Add & Norm normalises each token's sum (mean 0, variance 1, then γ and β)."
    ),
    "LayerNorm before cross-attention": (
        "Pre-norm: the decoder's vectors are normalised before the cross-attention reads them."
    ),
    "cross-attention output": (
        "Cross-attention (taken apart under the cross stack): Q from the decoder, K and V from "
        "the encoder output C."
    ),
    "cross-attention residual": (
        "Residual connection: the cross-attention output added to the decoder's vectors."
    ),
    "LayerNorm after cross-attention": "Post-norm: Add & Norm after the cross-attention.",
    "LayerNorm before FFN": "Pre-norm: each token's vector is normalised before the FFN reads it.",
    "RMSNorm before FFN": (
        "Pre-norm with RMSNorm: each token's vector is normalised by its root mean square before "
        "the MLP reads it."
    ),
    "FFN gate": (
        "The gated MLP's gate: one linear map widens each token to d_ff numbers that will decide, "
        "through SiLU, how much of each feature passes."
    ),
    "FFN up": (
        "The gated MLP's up projection: a second linear map to d_ff features, the ones the gate "
        "scales."
    ),
    "FFN hidden": (
        "The FFN's first linear layer widens each token to d_ff neurons, then the activation."
    ),
    "FFN output": (
        "The second linear layer maps the d_ff neurons back to d_model: the FFN's output."
    ),
    "RMSNorm on FFN output": (
        "The MLP's output normalised once more (post_feedforward_layernorm) before the residual "
        "connection adds it: the second half of the sandwich."
    ),
    "FFN residual": "Residual connection: the FFN output added to the vector it read.",
    "LayerNorm after FFN": "Post-norm: the second Add & Norm.",
    "output": (
        "The layer's output: the residual stream the next layer reads (hidden_states[layer + 1])."
    ),
}
CONVENTION = {  # how the quoted tutorial hides a score, said beside this model's -inf
    "000": (
        " Seed 000 writes -1e9 where mask == 0; this model adds -inf: after the softmax both are 0."
    ),
    "003": (
        " Seed 003 writes -1e4 where its mask is True (True = hidden there; here True = may "
        "attend)."
    ),
    "004": " Seed 004 writes -inf too.",
    "llama": (
        " transformers' code adds the lowest float32 (about -3.4e38) where hidden; this model adds "
        "-inf: after the softmax both are 0."
    ),
}


POSITIONS_OFF = Msg(
    "Positional encoding is switched off for this run: RoPE turns nothing, the heads pass "
    "unchanged."
)
GATED_HIDDEN = Msg(
    "The gate through SiLU times the up features, one by one: the d_ff neurons W_down reads."
)


# Gemma 3's norms said its own way: its RMSNorm's gain is 1 + w; its gate goes through GELU
GEMMA_NORMS: dict[str, Msg] = {
    "RMSNorm before attention": Msg(
        "Pre-norm with Gemma's RMSNorm: each token's vector is divided by its root mean square "
        "and scaled by 1 + w (w is stored, so a zero w keeps the vector as it is); the residual "
        "keeps the un-normalised one."
    ),
    "RMSNorm before FFN": Msg(
        "Pre-norm with Gemma's RMSNorm (gain 1 + w): each token's vector is normalised before "
        "the MLP reads it."
    ),
}
GATE_GELU = Msg(
    "The gated MLP's gate: one linear map widens each token to d_ff numbers that will decide, "
    "through GELU (its tanh form), how much of each feature passes."
)
GATED_HIDDEN_GELU = Msg(
    "The gate through GELU (tanh form) times the up features, one by one: the d_ff neurons "
    "W_down reads."
)


def embeddings_note(scale: float) -> Msg:
    """Layer 0's input note in a model that scales its token embeddings by √d_model (Gemma)."""
    return Msg(
        "Layer 0 reads the token embeddings multiplied by √d_model = {scale} (Gemma scales them "
        "up to the size of the residual stream): one d_model vector per token.",
        scale=f"{scale:.2f}",
    )


def rope_base_note(first: Msg, local: bool, base: float, other: float) -> Msg:
    """A RoPE step's note in a model whose local and full layers turn by different bases."""
    said = (
        " This sliding (local) layer turns by the base θ = {base}; the full layers by {other}."
        if local
        else " This full (global) layer turns by the base θ = {base}; the sliding layers by "
        "{other}."
    )
    return joined(first, Msg(said, base=f"{base:.0f}", other=f"{other:.0f}"))


NOTES: dict[str, Msg] = {name: Msg(text) for name, text in SAID.items()}


def joined(first: Msg, more: Msg) -> Msg:
    """Two sentences as one note, each said in the reader's language."""
    return Msg("{first}{more}", first=first, more=more)


def mask_note(
    kind: str, hidden: int, total: int, seed: str, window: int | None = None, layers: str = ""
) -> Msg:
    """The masked scores' note: which mask, how many scores it hides, and how the quoted code
    hides a score beside this model's -inf. ``layers``: "local" or "full" in a model whose
    sliding layers sit among full ones (Gemma 3), "" where every layer has the same mask."""
    if kind == "causal" and layers == "local":
        said = Msg(
            "This sliding (local) layer's causal mask with a window of {window} (Gemma 3): a "
            "token sees only itself and the {before} tokens before it; {hidden} of the {total} "
            "scores per head (above the diagonal, or too far back) become -inf.",
            window=window,
            before=window - 1,
            hidden=hidden,
            total=total,
        )
    elif kind == "causal" and layers == "full":
        said = Msg(
            "This full (global) layer's causal mask, no window: a token sees itself and every "
            "earlier token; {hidden} of the {total} scores per head (above the diagonal) become "
            "-inf.",
            hidden=hidden,
            total=total,
        )
    elif kind == "causal" and window is not None:
        said = Msg(
            "The causal mask with a sliding window of {window} (Mistral): a token sees only "
            "itself and the {before} tokens before it; {hidden} of the {total} scores per "
            "head (above the diagonal, or too far back) become -inf.",
            window=window,
            before=window - 1,
            hidden=hidden,
            total=total,
        )
    elif kind == "causal":
        said = Msg(
            "The causal mask: a token sees only itself and earlier tokens; {hidden} of the "
            "{total} scores per head (above the diagonal) become -inf.",
            hidden=hidden,
            total=total,
        )
    elif hidden:
        said = Msg(
            "The padding mask: {hidden} of the {total} scores per head become -inf.",
            hidden=hidden,
            total=total,
        )
    else:
        said = Msg(
            "The padding mask hides padded keys (-inf); among this text's real tokens it hides "
            "none, so the scores pass unchanged."
        )
    convention = "llama" if seed.startswith("modeling_") else seed.removeprefix("seed ")
    return joined(said, Msg(CONVENTION[convention])) if convention in CONVENTION else said


def head_mask_note(kept: str, mean: bool) -> Msg:
    """The concat step's note when a head mask removes heads (zeroed, or their mean kept)."""
    said = (
        " Head mask m = [{kept}]: a removed head's context is replaced by its mean over the tokens."
        if mean
        else " Head mask m = [{kept}]: a removed head's context is zeroed."
    )
    return joined(NOTES["concat"], Msg(said, kept=kept))
