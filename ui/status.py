"""The status line: what ran, where and how fast, the notices, and the link to the view."""

from __future__ import annotations

import logging

from engine import Analysis, InputError
from lang import Msg, Note, message_of, tr
from viz.common import md_literal

log = logging.getLogger("transformer_anatomy")


def status_markdown(analysis: Analysis | None, notices: list, link: str | None) -> str:
    """The status line in the request's language (notices made earlier are said again, lang.Msg)."""
    # A Msg is said now, in the reader's language; other notices were said when made (sentence).
    parts = [
        ("" if isinstance(n, Note) else "⚠️ ") + md_literal(tr(n) if isinstance(n, Msg) else n)
        for n in notices
    ]
    if analysis is not None:
        t = analysis.trace
        where = "CUDA" if t.device.startswith("cuda") else "CPU"
        label = analysis.model.label  # a model id as it is; a described model in the language
        label = md_literal(tr(label) if isinstance(label, Msg) else label)  # (user text: escaped)
        parts.append(
            tr(
                "**{label}** · {n} tokens · {layers} layers × {heads} heads · "
                "forward pass on {where} in {ms:.0f} ms",
                label=label,
                n=int(t.attention_mask[0].sum()),
                layers=t.config.n_layers,
                heads=t.config.n_heads,
                where=where,
                ms=analysis.seconds * 1e3,
            )
        )
    if link:
        parts.append(f"[{tr('Link to this view')}]({link})")
    return "  \n".join(parts)


def sentence(exc: Exception) -> str:
    """One sentence for the status line, whatever went wrong; the server keeps serving."""
    if isinstance(exc, InputError):
        return message_of(exc)
    log.warning("request failed: %s: %s", type(exc).__name__, str(exc)[:500])
    detail = str(exc).splitlines()[0][:200] if str(exc) else ""
    return tr(
        "This input could not be analysed ({what}); the app is still running — try another "
        "text or model.",
        what=type(exc).__name__ + (": " + detail if detail else ""),
    )
