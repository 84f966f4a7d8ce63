"""The tab registry: a new view is one module in this package plus one line here."""

from __future__ import annotations

from ui.tabs import (
    attention,
    bertviz,
    circuits,
    embeddings,
    heads,
    hidden,
    layer,
    masks,
    model,
    output,
    patching,
    tokens,
    train,
)
from ui.tabs.base import Built, Tab, View

TABS: tuple[Tab, ...] = (
    tokens.TAB,
    embeddings.TAB,
    attention.TAB,
    layer.TAB,
    heads.TAB,
    patching.TAB,
    circuits.TAB,
    masks.TAB,
    output.TAB,
    hidden.TAB,
    bertviz.TAB,
    model.TAB,
    train.TAB,
)
BY_ID: dict[str, Tab] = {tab.id: tab for tab in TABS}
TAB_IDS: tuple[str, ...] = tuple(BY_ID)
# Each tab's figures, first drawn first, with the layer and head fields each reads (a figure's
# id in a link's fig= is its element id less "-plot"): a deck's slide names a layer and head only
# where its figure shows one (ui/js/deck.js).
FIGURE_FIELDS: dict[str, dict[str, list[str]]] = {
    tab.id: {
        name.removesuffix("_plot").replace("_", "-"): [f for f in fields if f in ("layer", "head")]
        for name, fields in tab.depends.items()
        if name.endswith("_plot")
    }
    for tab in TABS
}

__all__ = ["BY_ID", "FIGURE_FIELDS", "TABS", "TAB_IDS", "Built", "Tab", "View"]
