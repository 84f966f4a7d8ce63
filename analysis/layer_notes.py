"""What each step of a layer does, in one English sentence (analysis.layer_steps gives it to
every Step; the page shows it on the step's card, ``lang.tr(step.note)``).

A note is a ``lang.Msg``: English text that remembers its pattern, so the card says it in the
reader's language. The Chinese is in ui/zh_CN.json, the one table of our words, under each
English sentence (or pattern, with its {fields}); there the names a Chinese sentence keeps in
English (Pre-norm, d_model, a tensor's name) are marked as code, `d_model`.
"""

from __future__ import annotations

from analysis.layer_lines import LLAMA_FILE
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
        " LLaMA's code adds the lowest float32 (about -3.4e38) where hidden; this model adds "
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


NOTES: dict[str, Msg] = {name: Msg(text) for name, text in SAID.items()}


def joined(first: Msg, more: Msg) -> Msg:
    """Two sentences as one note, each said in the reader's language."""
    return Msg("{first}{more}", first=first, more=more)


def mask_note(kind: str, hidden: int, total: int, seed: str, window: int | None = None) -> Msg:
    """The masked scores' note: which mask, how many scores it hides, and how the quoted code
    hides a score beside this model's -inf."""
    if kind == "causal" and window is not None:
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
    convention = "llama" if seed.startswith(LLAMA_FILE) else seed.removeprefix("seed ")
    return joined(said, Msg(CONVENTION[convention])) if convention in CONVENTION else said


def head_mask_note(kept: str, mean: bool) -> Msg:
    """The concat step's note when a head mask removes heads (zeroed, or their mean kept)."""
    said = (
        " Head mask m = [{kept}]: a removed head's context is replaced by its mean over the tokens."
        if mean
        else " Head mask m = [{kept}]: a removed head's context is zeroed."
    )
    return joined(NOTES["concat"], Msg(said, kept=kept))
