"""How a minimal pair's measure is said, for both tabs that read the pair (Which heads matter,
ui/tabs/patching.py, and How the heads connect, ui/tabs/circuits.py): its tokens as the table
shows them, each marked once, and the metric in words."""

from __future__ import annotations

from lang import tr
from viz.common import display_token


def pieces(loaded, ids) -> list[str]:
    """Token ids (or a classifier's label ids) as the table shows them."""
    labels = loaded.net.config.token_labels
    if loaded.net.lm_head is None and labels:
        return [str(labels[i]) for i in ids]
    return list(loaded.tokenizer.convert_ids_to_tokens(list(ids)))


def marked(piece: str) -> str:
    """A token between ‹ and ›, once: a byte piece that is no whole character reads "‹\\xEC›"
    already (model.pieces), and is not marked again."""
    shown = display_token(piece)
    return shown if shown.startswith("‹") and shown.endswith("›") else f"‹{shown}›"


def what_measured(loaded, result) -> str:
    """The metric in words, for the figures' second line (``result``: a PairResult, or the
    circuits tab's PairSpec, which names its metric, answer, wrong token and position alike)."""
    if result.metric == "cosine":
        return tr("cosine to the clean output at position {position}", position=result.position)
    answer, wrong = pieces(loaded, [result.answer, result.wrong])
    return tr(
        "logit({answer}) − logit({wrong}) at position {position}",
        answer=marked(answer),
        wrong=marked(wrong),
        position=result.position,
    )
