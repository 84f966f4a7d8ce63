"""Who asks: what the asking page said about itself (ui/js/core.js ``ta.stamp``), and the id
every output of one analysed input carries."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from viz.screen import Screen


def run_id(key: tuple) -> str:
    """A short stable id of one analysed input; every output carries it, so a test (or a reader of
    the page) can tell a fresh figure from one left over from the previous run."""
    return hashlib.sha1(repr(key).encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class Client:
    """What the asking page said about itself: whether it fills figures from the head switch data
    (ui/js/fill.js), the id of the data it holds, and its screen (viz.screen: the figures are laid
    out for it). API clients: none of them."""

    fills: bool = False
    holds: str = ""
    screen: Screen | None = None

    @classmethod
    def of(cls, page: str | None) -> Client:
        """From the page's stamp: "<id>[|fill:<data id>][|screen:<w>x<W>x<H>[xp]]" (ta.stamp;
        "xp": the page is presenting)."""
        if not isinstance(page, str):
            return cls()
        said = dict(part.partition(":")[::2] for part in page.split("|")[1:])
        held = said.get("fill")
        return cls(
            fills=held is not None,
            holds=held if held and held.isalnum() and len(held) <= 32 else "",
            screen=Screen.parse(said.get("screen")),
        )


API = Client()  # an API client, or a page that cannot fill figures: every figure complete
