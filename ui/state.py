"""The view state a page shows, and its deep-link form (one parser, one writer).

A deep link carries everything needed to reopen the same view: text, model, target, the Masks
view's second sentence, the tab, the stack, layer and head, the A/B heads, the dimensions, the
bertviz view and the shipped corpus the Heads tab measured (``corpus=en``). Parameters that are
not valid are named in the status line, never dropped silently.

Each selection field declares one rule (ui/fields.py: a whole number within a bound, a choice, a
text cut at a length), where it is used: the stack, layer and head here, a tab's own fields in
its ``Tab`` (``fields``). ``Selection`` is made of them; clamping it to a trace's
``engine.Bounds``, reading a link and writing one all follow the rules, so no field is spelled
out anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, make_dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, urlencode

from engine import Bounds, bounds_of
from lang import tr
from shelf import LIVE_PREFIX
from ui.client import API, Client, run_id  # noqa: F401  (the page's callers read them here)
from ui.fields import HEAD, LAYER, Choice, Whole, declared
from ui.tabs import TABS

STACKS = ("encoder", "decoder", "cross")
CORPORA = ("en", "zh")  # the shipped sample corpora a link may name (assets/corpus/<id>.txt)
LINK_TEXT_CHARS = 2_000  # a link keeps at most this much text (browsers cut URLs near 32k)

# The fields every view reads; each tab declares its own (``Tab.fields``: the Embeddings tab's
# dimensions, the Attention tab's compared heads and colour scale, …).
SHARED = {
    "stack": declared("encoder", Choice(STACKS, always=True)),
    "layer": declared(0, LAYER),
    "head": declared(0, HEAD),
}


def _clamp(self, bounds):
    """The same selection made valid for a trace's ``Bounds`` (``engine.Bounds``; an analysis
    is asked for its own): the stack one it has, numbers within it."""
    if not isinstance(bounds, Bounds):
        bounds = bounds.bounds if hasattr(bounds, "bounds") else bounds_of(bounds.trace)
    stack = bounds.stack(self.stack)
    last = bounds.last[stack]
    values = {
        f.name: RULES[f.name].valid(getattr(self, f.name), f.default, last) for f in fields(self)
    }
    return Selection(**{**values, "stack": stack})


def _selection_fields() -> list[tuple[str, type, Any]]:
    """(name, type, field) of the shared fields, then each tab's own in page order; a name two
    tabs declare is an error."""
    declared_by: dict[str, str] = dict.fromkeys(SHARED, "ui.state")
    out = [(name, type(f.default), f) for name, f in SHARED.items()]
    for tab in TABS:
        for name, f in tab.fields.items():
            if name in declared_by:
                raise TypeError(f"{tab.id} declares {name}, which {declared_by[name]} declares")
            declared_by[name] = tab.id
            out.append((name, type(f.default), f))
    return out


# What the user picked in the view controls (all small values, safe to keep per session): the
# shared fields and every tab's own. Each field declares its rule (ui.fields); clamping, a link's
# parameters and the link written for a view all follow the rules.
Selection = make_dataclass(
    "Selection",
    _selection_fields(),
    frozen=True,
    namespace={"clamp": _clamp, "__doc__": "The view controls' values: shared and every tab's."},
)
Selection.__module__ = __name__  # pickled and named as ui.state's


RULES = {f.name: f.metadata["rule"] for f in fields(Selection)}
SELECTION_FIELDS = tuple(RULES)
INT_FIELDS = tuple(name for name, rule in RULES.items() if isinstance(rule, Whole) and rule.always)
CHOICES = {name: rule.choices for name, rule in RULES.items() if isinstance(rule, Choice)}
# Every parameter a deep link may carry (docs/link-parameters.md lists them; a test keeps the two
# equal). "present", "fig", "deck", "slide" and "lang" are read by the browser alone (presentation
# mode and the lecture deck: ui/js/present.js, deck.js; the language: ui/i18n.py).
LINK_PARAMETERS = (
    "text",
    "model",
    "target",
    "second",
    "tab",
    "pe",
    "present",
    "fig",
    "deck",
    "slide",
    "lang",
    "corpus",
)
LINK_PARAMETERS += SELECTION_FIELDS


@dataclass(frozen=True)
class ViewState:
    """Everything a view depends on: the inputs of one run plus the selection and the tab."""

    text: str
    model: str
    target: str = ""
    second: str = ""
    tab: str = "tokens"
    sel: Selection = Selection()
    positions: bool = True  # False: the same weights without the positional-encoding term
    corpus: str = ""  # a shipped sample corpus (CORPORA) the Heads tab measured for this model


def share_link(state: ViewState) -> str:
    """The query string that reopens exactly this view."""
    query = {"text": state.text[:LINK_TEXT_CHARS], "model": state.model, "tab": state.tab}
    if state.target:
        query["target"] = state.target[:LINK_TEXT_CHARS]
    if state.second:
        query["second"] = state.second[:LINK_TEXT_CHARS]
    if not state.positions:
        query["pe"] = "off"
    if state.corpus in CORPORA:
        query["corpus"] = state.corpus
    defaults = Selection()
    for name, rule in RULES.items():
        value = getattr(state.sel, name)
        if rule.always or value != getattr(defaults, name):
            linked = getattr(rule, "linked", None)
            query[name] = value[:linked] if linked else value
    return "?" + urlencode(query)


MAX_LINK_PARAMETERS = 64  # a link never needs more: the rest are ignored, with a note


def link_params(query: str) -> tuple[dict[str, str], list[str]]:
    """A query string's parameters (the last value of each; at most MAX_LINK_PARAMETERS read)."""
    pairs = parse_qsl(str(query).lstrip("?")[:400_000])  # 20,000 CJK characters, escaped
    invalid = []
    if len(pairs) > MAX_LINK_PARAMETERS:
        invalid.append(
            tr(
                "The link has more than {n} parameters; only the first {n} were read.",
                n=MAX_LINK_PARAMETERS,
            )
        )
    return dict(pairs[:MAX_LINK_PARAMETERS]), invalid


def link_selection(params: dict[str, str], invalid: list[str]) -> dict:
    """The selection fields a link sets; a sentence in ``invalid`` for each it could not read."""
    sel: dict = {}
    for name, rule in RULES.items():
        if name in params:
            value = rule.from_link(name, params[name], invalid)
            if value is not None:
                sel[name] = value
    if "layer" in sel or "head" in sel:  # A/B default to the linked head and the one after it
        layer, head = sel.get("layer", 0), sel.get("head", 0)
        sel.setdefault("layer_a", layer)
        sel.setdefault("head_a", head)
        sel.setdefault("layer_b", layer)
        sel.setdefault("head_b", head + 1)
    return sel


def link_inputs(params: dict[str, str], models, tabs, invalid: list[str]) -> dict:
    """The run inputs and the tab a link sets; a sentence in ``invalid`` for each it refused."""
    values: dict = {
        name: params[name][:20_000] for name in ("text", "target", "second") if name in params
    }
    if "model" in params:
        if params["model"] in models:
            values["model"] = params["model"]
        elif params["model"].startswith(LIVE_PREFIX):
            invalid.append(
                tr("model= names a model trained on another page; its weights stay that page's")
            )
        else:
            invalid.append(
                tr("model={value} is not a model here", value=repr(params["model"][:40]))
            )
    if "tab" in params:
        if params["tab"] in tabs:
            values["tab"] = params["tab"]
        else:
            invalid.append(
                tr(
                    "tab={value} is not one of {tabs}",
                    value=repr(params["tab"][:40]),
                    tabs=", ".join(tabs),
                )
            )
    if "pe" in params:
        if params["pe"] in ("on", "off"):
            values["positions"] = params["pe"] == "on"
        else:
            invalid.append(tr("pe={value} is not on or off", value=repr(params["pe"][:20])))
    if "corpus" in params:
        if params["corpus"] in CORPORA:
            values["corpus"] = params["corpus"]
            if "heads" in tabs:  # the corpus is measured there (ta.openLink agrees)
                values.setdefault("tab", "heads")
        else:
            invalid.append(
                tr(
                    "corpus={value} is not {samples} (a shipped sample)",
                    value=repr(params["corpus"][:20]),
                    samples=tr(" or ").join(CORPORA),
                )
            )
    return values


def parse_link(
    query: str, models: set[str], tabs: tuple[str, ...], default: ViewState
) -> tuple[ViewState, list[str]]:
    """A deep link's ViewState (``default`` where a parameter is absent) and a sentence for every
    parameter that was invalid and therefore ignored."""
    params, invalid = link_params(query)
    values = link_inputs(params, models, tabs, invalid)
    sel = link_selection(params, invalid)
    invalid += [
        tr("{name} is not a link parameter", name=repr(name[:20]))
        for name in params
        if name not in LINK_PARAMETERS
    ]
    return replace(default, **values, sel=replace(default.sel, **sel)), invalid
