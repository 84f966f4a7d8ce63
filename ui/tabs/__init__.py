"""The tab registry: a new view is one module in this package plus one line here."""

from __future__ import annotations

from ui.tabs import (
    attention,
    bertviz,
    embeddings,
    heads,
    hidden,
    layer,
    masks,
    model,
    output,
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
    masks.TAB,
    output.TAB,
    hidden.TAB,
    bertviz.TAB,
    model.TAB,
    train.TAB,
)
BY_ID: dict[str, Tab] = {tab.id: tab for tab in TABS}
TAB_IDS: tuple[str, ...] = tuple(BY_ID)

__all__ = ["BY_ID", "TABS", "TAB_IDS", "Built", "Tab", "View"]
