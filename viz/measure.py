"""How much room text takes, and where a line or an axis's labels break: the measures the
server lays figures out with (viz.screen, viz.fit). Widths are estimated from the characters
(the page's fonts are the browser's), a little over what Chromium draws."""

from __future__ import annotations

import functools
import html
import math
import re
import unicodedata
from dataclasses import dataclass

LINE = 1.25  # a tick label's line box, in its font size: labels closer than this touch
WIDE = "\u3000-\u9fff\uff00-\uffef"  # CJK characters and punctuation: a line may break at each


@functools.lru_cache(maxsize=8192)
def _em(ch: str) -> float:
    """One character's width in ems (see ``text_px``)."""
    if unicodedata.east_asian_width(ch) in ("W", "F"):
        return 1.0
    if ch.isupper() or ch.isdigit():
        return 0.7
    return 0.4 if ch in " ·.,:;|il'" else 0.62


def text_px(text: str, size: float) -> float:
    """An upper estimate of a line's width in px at ``size`` px (DejaVu / Noto widths): wide
    (CJK) characters a full em, capitals and digits 0.7, narrow marks 0.4, other characters
    0.62; HTML tags are not drawn, a <sup> part is 0.7 of the size."""
    width, sup = 0.0, False
    for piece in re.split(r"(<[^>]+>)", text):
        if piece.startswith("<"):
            sup = {"<sup>": True, "</sup>": False}.get(piece.lower(), sup)
            continue
        width += sum(map(_em, html.unescape(piece))) * size * (0.7 if sup else 1.0)
    return width


def shorten(label: str, chars: int) -> str:
    """An (escaped) label cut to ``chars`` characters with an ellipsis."""
    plain = html.unescape(label)
    if len(plain) <= chars:
        return label
    return html.escape(plain[: max(1, chars - 1)] + "…", quote=True).replace("&quot;", "&#34;")


@functools.lru_cache(maxsize=4096)  # a tab's titles repeat (the slide's line, a layer's steps)
def wrap(text: str, room: float, size: float) -> str:
    """A title's lines (split at <br>) each broken at its last space, "·" or Chinese
    punctuation that fits in ``room`` px; a <sup> line stays a <sup> line."""
    out = []
    for line in re.split(r"<br\s*/?>", text, flags=re.I):
        sup = line.lower().startswith("<sup>") and line.lower().endswith("</sup>")
        body = line[5:-6] if sup else line
        scale = 0.7 if sup else 1.0
        # a tag is never broken; a line breaks after a space, "·" or any Chinese character
        words = re.findall(rf"<[^>]+>|[{WIDE}]|[^<\s·—{WIDE}]+[\s·—]*|[\s·—]+", body)
        # text_px's widths, added up word by word: a tag takes no room and a <sup> in the line
        # makes what follows 0.7 of the size until it closes (a line is measured alone)
        pieces, current, width, inner = [], "", 0.0, False
        for word in filter(None, words):
            now = {"<sup>": True, "</sup>": False}.get(word.lower(), inner)
            px = 0.0 if word.startswith("<") else sum(map(_em, html.unescape(word))) * size
            if current and width + px * scale * (0.7 if now else 1.0) > room:
                pieces.append(current.rstrip())
                now = {"<sup>": True}.get(word.lower(), False)  # the new line's own tags
                current, width = word, px * scale * (0.7 if now else 1.0)
            else:
                current, width = current + word, width + px * scale * (0.7 if now else 1.0)
            inner = now
        pieces.append(current.rstrip())
        out += [f"<sup>{p}</sup>" if sup else p for p in pieces if p]
    return "<br>".join(out)


def title_px(text: str, size: float) -> float:
    """The height a title's lines take: a main line 1.5 of its size, a <sup> line 1.25 (a
    glyph from a fallback font, the masks' ■, stands taller than the title's own)."""
    lines = re.split(r"<br\s*/?>", text, flags=re.I) if text else []
    return sum(1.25 * size if line.lower().startswith("<sup>") else 1.5 * size for line in lines)


@dataclass(frozen=True)
class Ticks:
    """One category axis's shown labels: every ``step``-th, at ``angle``."""

    step: int
    angle: int

    def props(self, labels: list[str], chars: int, size: float) -> dict:
        keep = range(0, len(labels), self.step)
        return {
            "type": "category",
            # the axis knows its categories without the cells (a figure whose numbers the page
            # could not fill is drawn without z: shown labels must still name categories)
            "categoryorder": "array",
            "categoryarray": labels,
            "tickmode": "array",
            "tickvals": [labels[i] for i in keep],
            "ticktext": [shorten(labels[i], chars) for i in keep],
            "tickangle": self.angle,
            "tickfont": {"size": size},
            "automargin": False,
        }


def legend_rows(names: list[str], width: float, size: float = 12) -> int:
    """Rows Plotly's horizontal legend of these entries takes at ``width`` px: one where every
    entry fits, else columns as wide as its widest entry (Plotly aligns a legend of several
    rows so)."""
    widths = [40 + text_px(str(name), size) + 10 for name in names]
    if sum(widths) <= width:
        return 1
    return math.ceil(len(widths) / max(1, int(width // max(widths))))


def step_for(cell: float, size: float) -> int:
    """Every how many cells a label may stand so that neighbours do not touch."""
    return max(1, math.ceil(LINE * size / max(cell, 1e-6)))


def longest(labels: list[str], chars: int, size: float) -> float:
    """The widest of an axis's labels, cut to ``chars``, in px at ``size``."""
    return _widest(tuple(labels), chars) * size


@functools.lru_cache(maxsize=64)
def _widest(labels: tuple[str, ...], chars: int) -> float:
    # one text's labels are measured once for every box and font it is laid out for
    return max((text_px(shorten(label, chars), 1.0) for label in labels), default=0.0)
