"""What a tab is: its layout (build), what it draws (makers) and what each drawing depends on."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import gradio as gr

from engine import Analysis, InputError
from lang import message_of
from ui.client import API, Client
from ui.fields import as_int

if TYPE_CHECKING:
    from ui.state import Selection


def plot(elem_id: str) -> gr.Plot:
    """A figure with PNG and SVG buttons that save it cropped for a slide (ui/js/exports.js)."""
    buttons = [
        gr.Button(kind, size="sm", elem_id=f"{elem_id}-{kind.lower()}") for kind in ("PNG", "SVG")
    ]
    component = gr.Plot(elem_id=elem_id, show_label=False, buttons=buttons)
    for button in buttons:
        kind = json.dumps(button.value.lower())
        button.click(fn=None, js=f"() => {{ ta.saveImage({json.dumps(elem_id)}, {kind}); }}")
    return component


def tile_picker(elem_id: str, figure: str) -> gr.HTML:
    """A hidden box that picks a head: gr.Plot has no click event, so a clicked tile or point of
    ``figure`` writes its "layer,head,time" here (ta.tilePicker, ui/js/figures.js) and the box's
    change selects that head (its id goes into ``Built.picks``)."""
    return gr.HTML(
        "",
        js_on_load=f"ta.tilePicker(props, {json.dumps(figure)})",
        elem_id=elem_id,
        elem_classes="ta-hidden",
    )


class Slider(gr.Slider):
    """A layer/head slider that accepts any number (the selection clamps it to the model).

    Gradio checks a slider's value against its build-time bounds and answers anything else with a
    bare "Error" and a server traceback; here the bounds follow the model (a 24-layer checkpoint
    after the 6-layer default), and an API client may send null or 1e300 — each becomes a valid
    selection instead (ui.state.Selection.clamp).
    """

    def preprocess(self, payload):
        return as_int(payload)


class Dropdown(gr.Dropdown):
    """A model picker that passes any text through: the handler refuses an unknown model with a
    sentence (Gradio's own check answers a bare "Error" and logs a traceback)."""

    def preprocess(self, payload):
        return payload if isinstance(payload, str) else None


class Radio(gr.Radio):
    """A choice that passes any text through (the selection falls back to its default).

    Gradio refuses a value outside the choices it was built with, with a bare "Error" and a
    server traceback; an API client may send anything, and the view state makes it valid.
    """

    def preprocess(self, payload):
        return payload if isinstance(payload, str | bool | int | float) else None


@dataclass(frozen=True)
class View:
    """What a tab draws from: one analysis, the (clamped) selection, and the Masks view's batch;
    and for whom: what the asking page can do, and which outputs this response carries."""

    analysis: Analysis
    sel: Selection
    batch: Analysis | None = None
    client: Client = API
    drawing: frozenset[str] = frozenset()


@dataclass
class Built:
    """The components a tab made inside its gr.Tab."""

    outputs: dict  # output name -> component, in drawing order
    controls: dict = field(default_factory=dict)  # Selection field -> component (tab's own)
    inputs: dict = field(default_factory=dict)  # run input name -> component (e.g. "second")
    # Components whose value "layer,head[,…]" selects that head everywhere (a clicked overview
    # tile, a chosen row of the head table).
    picks: list = field(default_factory=list)
    row_picks: list = field(
        default_factory=list
    )  # tables whose clicked row (layer, head, …) selects
    actions: dict = field(default_factory=dict)  # action name -> button that draws the outputs
    # reading that name (see Tab.lazy)


@dataclass(frozen=True)
class Tab:
    """One view of the app. A new view is one module defining a Tab, plus one line in tabs/__init__.

    depends: output name -> the Selection fields it reads; changing a field redraws only the
    outputs that read it, from the cached trace (no forward pass).
    """

    id: str
    label: str
    build: Callable[[], Built]
    makers: Callable[[View], dict[str, Callable[[], object]]]
    depends: dict[str, tuple[str, ...]]
    needs_batch: bool = False  # draws from a two-text padded batch (the Masks view)
    lazy: tuple[str, ...] = ()  # outputs drawn only by their action button, not with the tab
    # lazy output -> what it shows when the tab is drawn again (a table's empty headers, in the
    # request's language); the others are cleared to nothing
    cleared: dict[str, Callable[[], object]] = field(default_factory=dict)
    # output -> the selection fields whose change the browser redraws by itself (no request),
    # with ``ta.switches[<tab id>]`` (ui/js/head_switch.js): an async JS function of the values
    # named in ``switch_inputs`` (selection fields or this tab's outputs) that redraws them and
    # resolves false when it could not.
    in_browser: dict[str, tuple[str, ...]] = field(default_factory=dict)
    switch_inputs: tuple[str, ...] = ()
    # actions that wait in a queue of their own, one at a time for the whole server (ui/events.py):
    # seconds of forward passes (patching every head) that a class asking at once must not
    # hold the slots of the other tabs' draws with
    own_queue: tuple[str, ...] = ()
    # the action a link to this tab that names a minimal pair presses once its view is open
    # (Which heads matter patches it); "": none
    linked: str = ""
    # the Selection fields the tab's outputs read: those in ``depends`` and any whose control is
    # on another tab (a pair's boxes); None: every field. The tab drawn again after a change of
    # none of them shows what it showed: nothing is sent and its on-demand outputs stay.
    reads: tuple[str, ...] | None = None
    # on-demand output -> the selection field whose control it sets: an action that fills a
    # box with what it measured (Patch's answer, wrong token and position), so the page's next
    # request carries that value for the same measure
    fills: dict[str, str] = field(default_factory=dict)
    # the tab's own selection fields (ui.fields.declared: a default and its rule), which its
    # controls set and a link carries; the fields every view reads are ui.state's
    fields: dict[str, Any] = field(default_factory=dict)
    # what the tab's outputs read beside the run and the selection: a function of the analysis
    # and the (clamped) selection whose value changes when a measure made elsewhere changes what
    # it shows (How the heads connect: whether its pair's exact patching is at hand). Part of
    # what the tab shows (ui.handlers.Views.draw): the tab drawn again after that change is
    # drawn anew, and no view drawn before it is handed to another page. None: nothing.
    measured: Callable[[Any, Selection], object] | None = None

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(self.depends)

    @property
    def eager(self) -> set[str]:
        """The outputs drawn whenever the tab is."""
        return set(self.depends) - set(self.lazy)

    def measured_of(self, analysis, sel: Selection):
        """The state of the measures the tab's outputs read (``measured``), or None."""
        return None if self.measured is None else self.measured(analysis, sel)

    @property
    def on_demand(self) -> set[str]:
        """The outputs the tab's own-queue actions draw: its lazy ones and any other they draw
        again with what they measured (Compare's agreement over the first grid)."""
        return set(self.lazy).union(*(self.redrawn_by(a) for a in self.own_queue))

    def read_of(self, sel: Selection):
        """What of ``sel`` decides what the tab shows (``reads``)."""
        if self.reads is None:
            return sel
        return tuple((name, getattr(sel, name)) for name in self.reads)

    def filled(self, sel: Selection, values: dict) -> Selection:
        """``sel`` with the values the drawn ``values`` put in the boxes they fill (``fills``)."""
        boxes = {}
        for out, name in self.fills.items():
            value = values.get(out)
            if isinstance(value, dict) and "value" in value:  # gr.update(..., value=...)
                boxes[name] = value["value"]
        return replace(sel, **boxes) if boxes else sel

    def redrawn_by(self, field_name: str) -> set[str]:
        """The outputs a change of this selection field redraws."""
        return {name for name, fields_ in self.depends.items() if field_name in fields_}

    def server_redraws(self, field_name: str) -> bool:
        """Whether a change of this field needs the server here (some output reads it and the
        browser cannot redraw that output itself)."""
        return any(
            field_name not in self.in_browser.get(name, ()) for name in self.redrawn_by(field_name)
        )

    def browser_redraws(self, field_name: str) -> bool:
        return any(field_name in fields_ for fields_ in self.in_browser.values())


class Attempt:
    """A measure a tab's outputs share, made once per draw: its value, or the sentence saying
    why nothing was measured (the InputError it raised), and makers that draw from the value
    or leave their output empty."""

    def __init__(self, make: Callable) -> None:
        self._make = make

    @functools.cached_property
    def outcome(self) -> tuple:
        """(value, None) or (None, the sentence)."""
        try:
            return self._make(), None
        except InputError as exc:
            return None, message_of(exc)

    @property
    def value(self):
        return self.outcome[0]

    def drawn(self, draw: Callable) -> Callable:
        """A maker: ``draw(value)``, or nothing when there is no value."""
        return lambda: None if self.value is None else draw(self.value)


def downloads(csv: tuple[str, str], npz: tuple[str, str]) -> tuple:
    """A row of a tab's two downloads, each (label, elem_id): its CSV and its NPZ buttons."""
    with gr.Row():
        return tuple(
            gr.DownloadButton(label, elem_id=elem_id, size="sm") for label, elem_id in (csv, npz)
        )
