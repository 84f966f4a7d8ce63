"""The view state a page shows, and its deep-link form (one parser, one writer).

A deep link carries everything needed to reopen the same view: text, model, target, the Masks
view's second sentence, the tab, the stack, layer and head, the A/B heads, the dimensions, the
bertviz view and the shipped corpus the Heads tab measured (``corpus=en``). Parameters that are
not valid are named in the status line, never dropped silently.

Each selection field declares one rule (a whole number within a bound, a choice, a text cut at a
length); clamping a selection to a trace's ``engine.Bounds``, reading a link and writing one all
follow the rules, so no field is spelled out anywhere else here.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any
from urllib.parse import parse_qsl, urlencode

from engine import Bounds, bounds_of
from lang import tr
from shelf import LIVE_PREFIX
from viz.screen import Screen

STACKS = ("encoder", "decoder", "cross")
BERTVIZ_VIEWS = ("head", "model")
SCALES = ("auto", "fixed", "head")  # attention colours: 0–1 unless faint, 0–1, 0–head max
MEASURES = ("weights", "norms")  # attention maps: α, or ‖α f(x)‖ (Kobayashi et al. 2020)
ABLATIONS = ("zero", "mean")
CONVENTIONS = ("ours", "clark")  # head statistics: ours, or Clark et al.'s notebook (analysis)
UNITS = ("tokens", "words")  # attention views over tokens, or words (Clark et al.'s convention)
CORPORA = ("en", "zh")  # the shipped sample corpora a link may name (assets/corpus/<id>.txt)
DEFAULT_DIMS = "0, 1, 2, 3"
# A minimal pair's other text is kept as long as the page's own (engine.MAX_CHARS), so the
# patching tab can say how long a text it will not read was (ui/patching_inputs.py).
PAIR_CHARS = 20_000
LINK_TEXT_CHARS = 2_000  # a link keeps at most this much text (browsers cut URLs near 32k)
MAX_KEEP = 10_000  # the most edges a circuit keeps on the page (GPT-2 small has ~32,000)


@dataclass(frozen=True)
class Whole:
    """A whole number from 0: up to the last the trace allows (``bound``: "layer", "head",
    "token" or "step" of the chosen stack) or to ``most``; a link carries up to ``digits`` digits
    and writes it always, or (``always`` False) only when it is not the default."""

    bound: str | None = None
    most: int | None = None
    digits: int = 4
    always: bool = True

    def valid(self, value, default, last: dict[str, int]):
        number = max(as_int(value), 0)
        top = last[self.bound] if self.bound else self.most
        return number if top is None else min(number, top)

    def from_link(self, name: str, raw: str, invalid: list[str]):
        if re.fullmatch(rf"\d{{1,{self.digits}}}", raw.strip()):
            number = int(raw)
            return number if self.most is None else min(number, self.most)
        invalid.append(tr("{name}={value} is not a whole number", name=name, value=repr(raw[:20])))
        return None


@dataclass(frozen=True)
class Choice:
    """One of ``choices``; anything else is the default (a link's is refused with a sentence)."""

    choices: tuple[str, ...]
    always: bool = False

    def valid(self, value, default, last: dict[str, int]):
        return value if value in self.choices else default

    def from_link(self, name: str, raw: str, invalid: list[str]):
        if raw in self.choices:
            return raw
        invalid.append(
            tr(
                "{name}={value} is not {allowed}",
                name=name,
                value=repr(raw[:20]),
                allowed=tr(" or ").join(self.choices),
            )
        )
        return None


@dataclass(frozen=True)
class Text:
    """Free text, cut at ``limit`` characters (``linked``: at most this many go into a link)."""

    limit: int
    linked: int | None = None
    always: bool = False

    def valid(self, value, default, last: dict[str, int]):
        return str(value or "")[: self.limit]

    def from_link(self, name: str, raw: str, invalid: list[str]):
        return raw[: self.limit]


def declared(default, rule) -> Any:
    """A Selection field: its default and the rule that makes any value valid (clamping, a
    link's parameter, whether a link writes it)."""
    return field(default=default, metadata={"rule": rule})


LAYER, HEAD = Whole("layer"), Whole("head")


@dataclass(frozen=True)
class Selection:
    """What the user picked in the view controls (all small values, safe to keep per session).

    Every field declares its rule (``declared``); clamping, a link's parameters and the link
    written for a view all follow the rules, so a new field is its one line here."""

    stack: str = declared("encoder", Choice(STACKS, always=True))
    layer: int = declared(0, LAYER)
    head: int = declared(0, HEAD)
    # The Attention tab's heads A and B compared.
    layer_a: int = declared(0, LAYER)
    head_a: int = declared(0, HEAD)
    layer_b: int = declared(0, LAYER)
    head_b: int = declared(1, HEAD)
    dims: str = declared(DEFAULT_DIMS, Text(200))  # the Embeddings tab's dimensions
    bertviz_view: str = declared("head", Choice(BERTVIZ_VIEWS))  # the bertviz tab's view
    scale: str = declared("auto", Choice(SCALES))  # the attention views' colour scale
    measure: str = declared("weights", Choice(MEASURES))  # the attention maps: α or ‖α f(x)‖
    # The Heads tab: ablation, the score breakdown's query and key (clamped to the text by the
    # view that reads them), heads ablated together ("0:2, 3:5"; empty: the chosen layer's), the
    # head statistics' conventions and a pattern column of the head table ("first", …).
    ablation: str = declared("zero", Choice(ABLATIONS))
    query: int = declared(0, Whole())
    key: int = declared(0, Whole())
    heads_set: str = declared("", Text(400))
    convention: str = declared("ours", Choice(CONVENTIONS))
    pattern: str = declared("", Text(80))
    units: str = declared("tokens", Choice(UNITS))  # the attention views over tokens or words
    # The Inside-a-layer tab: the token it walks through the layer, the step whose numbers it draws.
    token: int = declared(0, Whole("token"))
    step: int = declared(0, Whole("step"))
    # Which heads matter (ui/tabs/patching.py): the minimal pair's other text, the answer and the
    # wrong token whose logit difference is measured (empty: picked from the runs), and the
    # position read ("": the last, or an encoder's first that differs).
    pair: str = declared("", Text(PAIR_CHARS, linked=LINK_TEXT_CHARS))
    answer: str = declared("", Text(80))
    wrong: str = declared("", Text(80))
    read_at: str = declared("", Text(8))
    # How the heads connect (ui/tabs/circuits.py): the edges its circuit keeps (0: the smallest
    # circuit measured that restores 80 % of the answer).
    keep: int = declared(0, Whole(most=MAX_KEEP, digits=5, always=False))

    def clamp(self, bounds) -> Selection:
        """The same selection made valid for a trace's ``Bounds`` (``engine.Bounds``; an
        analysis is asked for its own): the stack one it has, numbers within it."""
        if not isinstance(bounds, Bounds):
            bounds = bounds.bounds if hasattr(bounds, "bounds") else bounds_of(bounds.trace)
        stack = bounds.stack(self.stack)
        last = bounds.last[stack]
        values = {
            f.name: RULES[f.name].valid(getattr(self, f.name), f.default, last)
            for f in fields(self)
        }
        return Selection(**{**values, "stack": stack})


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


def as_int(value) -> int:
    """An integer from a slider or a link; 0 for anything that is not a finite number."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    if number != number or number in (float("inf"), float("-inf")):  # NaN, ±inf
        return 0
    return int(number)


def parse_dims(text: str, d_model: int) -> tuple[tuple[int, ...], str | None]:
    """ "0, 1, 2, 3" -> (0, 1, 2, 3); a note when something was out of range or unreadable."""
    found = [int(x) for x in re.findall(r"\d{1,6}", str(text or "")[:200])][:8]
    dims = tuple(dict.fromkeys(d for d in found if d < d_model))
    if not dims:
        note = tr("Dimensions must be numbers from 0 to {last}; showing 0–3.", last=d_model - 1)
        return (0, 1, 2, 3)[: min(4, d_model)], note
    if len(dims) < len(found):
        return dims, tr("Dimensions above {last} were left out.", last=d_model - 1)
    return dims, None


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
        """From the page's stamp: "<id>[|fill:<data id>][|screen:<w>x<W>x<H>]" (ta.stamp)."""
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
