"""The view state a page shows, and its deep-link form (one parser, one writer).

A deep link carries everything needed to reopen the same view: text, model, target, the Masks
view's second sentence, the tab, the stack, layer and head, the A/B heads, the dimensions, the
bertviz view and the shipped corpus the Heads tab measured (``corpus=en``). Parameters that are
not valid are named in the status line, never dropped silently.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, fields, replace
from urllib.parse import parse_qsl, urlencode

from analysis.layer_steps import step_count
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


@dataclass(frozen=True)
class Selection:
    """What the user picked in the view controls (all small values, safe to keep per session)."""

    stack: str = "encoder"
    layer: int = 0
    head: int = 0
    layer_a: int = 0
    head_a: int = 0
    layer_b: int = 0
    head_b: int = 1
    dims: str = DEFAULT_DIMS
    bertviz_view: str = "head"
    scale: str = "auto"
    measure: str = "weights"
    ablation: str = "zero"
    query: int = 0
    key: int = 0
    heads_set: str = ""  # heads to ablate together, "0:2, 3:5"; empty = the chosen layer's
    convention: str = "ours"  # the head statistics' conventions
    pattern: str = ""  # a pattern column of the head table ("first", "previous", …); empty: none
    units: str = "tokens"  # the attention views over tokens or over words
    token: int = 0  # the token the Inside-a-layer tab walks through the layer
    step: int = 0  # the step of that layer whose numbers it draws
    # Which heads matter (ui/tabs/patching.py): the minimal pair's other text, the answer and the
    # wrong token whose logit difference is measured (empty: picked from the runs), and the
    # position read ("": the last, or an encoder's first that differs).
    pair: str = ""
    answer: str = ""
    wrong: str = ""
    read_at: str = ""
    # How the heads connect (ui/tabs/circuits.py): the edges its circuit keeps (0: the smallest
    # circuit measured that restores 80 % of the answer).
    keep: int = 0

    def clamp(self, analysis) -> Selection:
        """The same selection made valid for this model (layer, head and stack in range)."""
        cfg = analysis.trace.config
        stack = self.stack if self.stack in analysis.trace.stacks else analysis.trace.stacks[0]

        def fit(value, last: int) -> int:
            return min(max(as_int(value), 0), last)

        last_layer, last_head = cfg.n_layers - 1, cfg.n_heads - 1
        return Selection(
            stack=stack,
            layer=fit(self.layer, last_layer),
            head=fit(self.head, last_head),
            layer_a=fit(self.layer_a, last_layer),
            head_a=fit(self.head_a, last_head),
            layer_b=fit(self.layer_b, last_layer),
            head_b=fit(self.head_b, last_head),
            dims=str(self.dims)[:200],
            bertviz_view=self.bertviz_view if self.bertviz_view in BERTVIZ_VIEWS else "head",
            scale=self.scale if self.scale in SCALES else "auto",
            measure=self.measure if self.measure in MEASURES else "weights",
            ablation=self.ablation if self.ablation in ABLATIONS else "zero",
            query=max(as_int(self.query), 0),  # clamped to the text by the view that reads it
            key=max(as_int(self.key), 0),
            heads_set=str(self.heads_set or "")[:400],
            convention=self.convention if self.convention in CONVENTIONS else "ours",
            pattern=str(self.pattern or "")[:80],
            units=self.units if self.units in UNITS else "tokens",
            token=fit(self.token, text_length(analysis.trace, stack) - 1),
            step=fit(self.step, step_count(cfg, stack) - 1),
            pair=str(self.pair or "")[:PAIR_CHARS],
            answer=str(self.answer or "")[:80],
            wrong=str(self.wrong or "")[:80],
            read_at=str(self.read_at or "")[:8],
            keep=min(max(as_int(self.keep), 0), MAX_KEEP),
        )


def text_length(trace, stack: str) -> int:
    """The real tokens of the stack's queries (the first text): what ``token`` may name."""
    mask = trace.attention_mask
    if stack != "encoder" and trace.tgt_attention_mask is not None:
        mask = trace.tgt_attention_mask
    return max(int(mask[0].sum()), 1)


MAX_KEEP = 10_000  # the most edges a circuit keeps on the page (GPT-2 small has ~32,000)
SELECTION_FIELDS = tuple(f.name for f in fields(Selection))
INT_FIELDS = (
    "layer",
    "head",
    "layer_a",
    "head_a",
    "layer_b",
    "head_b",
    "query",
    "key",
    "token",
    "step",
)
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
    for name in SELECTION_FIELDS:
        value = getattr(state.sel, name)
        if name == "stack" or name in INT_FIELDS or value != getattr(defaults, name):
            query[name] = value[:LINK_TEXT_CHARS] if name == "pair" else value
    return "?" + urlencode(query)


MAX_LINK_PARAMETERS = 64  # a link never needs more: the rest are ignored, with a note
CHOICES = {
    "stack": STACKS,
    "bertviz_view": BERTVIZ_VIEWS,
    "scale": SCALES,
    "measure": MEASURES,
    "ablation": ABLATIONS,
    "convention": CONVENTIONS,
    "units": UNITS,
}


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
    for name in INT_FIELDS:
        if name in params:
            raw = params[name]
            if re.fullmatch(r"\d{1,4}", raw.strip()):
                sel[name] = int(raw)
            else:
                invalid.append(
                    tr("{name}={value} is not a whole number", name=name, value=repr(raw[:20]))
                )
    for name, allowed in CHOICES.items():
        if name in params:
            if params[name] in allowed:
                sel[name] = params[name]
            else:
                invalid.append(
                    tr(
                        "{name}={value} is not {allowed}",
                        name=name,
                        value=repr(params[name][:20]),
                        allowed=tr(" or ").join(allowed),
                    )
                )
    if "dims" in params:
        sel["dims"] = params["dims"][:200]
    if "heads_set" in params:
        sel["heads_set"] = params["heads_set"][:400]
    if "pattern" in params:
        sel["pattern"] = params["pattern"][:80]
    if "keep" in params:
        if re.fullmatch(r"\d{1,5}", params["keep"].strip()):
            sel["keep"] = min(int(params["keep"]), MAX_KEEP)
        else:
            invalid.append(
                tr(
                    "{name}={value} is not a whole number",
                    name="keep",
                    value=repr(params["keep"][:20]),
                )
            )
    for name, limit in (("pair", PAIR_CHARS), ("answer", 80), ("wrong", 80), ("read_at", 8)):
        if name in params:
            sel[name] = params[name][:limit]
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
