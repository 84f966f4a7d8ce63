"""Where a figure's layout is decided: for the screen the asking page reports.

A figure that declares what it is (``layout.meta.fit``) is laid out here, once, for the page that
asked: its margins, which tick labels show and at what angle, its title's lines, where its colour
bar stands, and the layout it takes when presented on a projector (``layout.meta.present``, which
the page swaps in without asking again). The page draws what it is sent: nothing in the browser
measures such a figure or lays it out again (``layout.meta.laid_out``).

Kinds of screen, from the page's report (ui/js/core.js ``ta.screen``): a phone (a figure narrower
than ``PHONE_BELOW`` px), a wider page, and — only while the page is in presentation mode — the
window it is presented in. A page that is not presenting gets no presented layout: laying each
figure out once more for a projector nobody uses cost every draw (a third of Inside a layer's
twenty step figures' layout work); the page asks again as it starts presenting.

Declared kinds of figure (any other figure is laid out by viz.fit: panels stacked on a phone,
titles wrapped, crowded category labels thinned):
- ``"square"``: one heatmap of tokens against tokens with square cells, with or without a colour
  bar (the head view, rollout, the causal and cross masks): every token named on hover, its tick
  labels thinned to what fits at the screen's size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from viz.fit import lay_out_general, take_narrow
from viz.measure import Ticks, step_for, text_px, title_px, wrap
from viz.measure import longest as _longest
from viz.present import SLIDE, in_room

PHONE_BELOW = 560  # px: a figure narrower than this is laid out for a phone
PRESENT_BAR = 58  # px the presentation's bar (48) and its gaps take from the window's height
PRESENT_PAD = 16  # px the presented block's padding takes from the window's width
PRESENT_SHARE = 0.68  # of the window's height a presented map's plot takes at least
TOOLBAR = 30  # px: Plotly's toolbar at the top of a figure on a page wider than a phone


@dataclass(frozen=True)
class Screen:
    """What the asking page reported: the width its tab gives a figure, and its window's size.
    Sizes are rounded down to 20 px (a phone's figure width excepted: a few px decide how large
    its cells can be) so that pages on alike screens share what the server drew."""

    width: int
    window_width: int
    window_height: int
    presenting: bool = False  # in presentation mode: its figures carry meta.present

    @classmethod
    def parse(cls, text: str | None) -> Screen | None:
        """``"326x390x844"`` (figure width x window width x window height), ``"…xp"`` from a
        page in presentation mode, or None."""
        parts = str(text or "").split("x")
        presenting = len(parts) == 4 and parts[3] == "p"
        if presenting:
            parts = parts[:3]
        if len(parts) != 3 or not all(p.isdigit() and 0 < len(p) <= 5 for p in parts):
            return None
        width, window_width, window_height = (max(200, min(int(p), 8000)) for p in parts)
        if width >= PHONE_BELOW:  # a few px of a wide page change no label
            width = 20 * (width // 20)
        window = 20 * (window_width // 20), 20 * (window_height // 20)
        return cls(width, *window, presenting=presenting)

    @property
    def phone(self) -> bool:
        return self.width < PHONE_BELOW

    @property
    def presented(self) -> bool:
        """Whether figures get the window's presented layout (a phone is never presented)."""
        return self.presenting and not self.phone

    def text(self) -> str:
        return f"{self.width}x{self.window_width}x{self.window_height}" + "xp" * self.presenting


@dataclass(frozen=True)
class Box:
    """The room a figure is drawn in, and the sizes of its text there."""

    width: float
    height: float | None  # None: the figure is as tall as its plot needs
    font: float  # tick labels
    title: float  # the title's main line
    y_chars: int  # how many characters of a query label show
    x_chars: int
    phone: bool = False
    centre: bool = False  # the figure fills the box, its plot in the middle (presented)
    top: int = 0  # px the page's title margin already has (kept as the least top margin)
    toolbar: bool = True  # Plotly's toolbar stands over the figure (not on a saved slide)
    bar_least: int = 8  # characters the colour bar's tick labels get room for, at least


@dataclass
class Room:
    """Where a square map's parts go in a box, in px: the margins, the cell's side, every how
    many cells a label stands, whether the x labels lie flat, how far below the plot they start."""

    top: float
    left: float
    right: float
    bottom: float = 0.0
    cell: float = 0.0
    step: int = 1
    flat: bool = False
    standoff: int = 0
    band: int = 0  # above the title: the toolbar's
    tallest: str = ""  # the title with the most lines any head's can have here (_tallest)


def _room(trace: dict, title: str, box: Box, shows_bar: bool, tallest: str = "") -> Room:
    """The margins around a square map of ``trace``'s labels and the cells' side in ``box``;
    the top holds ``title`` or, where it has more lines, ``tallest`` (another head's title)."""
    f, n_x, n_y = box.font, len(trace["x"]), len(trace["y"])
    # On a page wider than a phone, Plotly's toolbar stands in the figure's top right corner:
    # the title starts under it (a narrow figure's title ran under the toolbar).
    band = TOOLBAR if box.toolbar and not (box.phone or box.centre) else 0
    top = round(max(title_px(title, box.title), title_px(tallest, box.title)) + 14 + band)
    if box.height is not None and not box.phone and box.top:
        top = max(top, box.top)
    y_px = _longest(list(trace["y"]), box.y_chars, f)
    x_px = _longest(list(trace["x"]), box.x_chars, f)
    # At least ``bar_least`` characters, whatever this head's ticks: the head switch keeps the
    # layout of the head first drawn, and another head's ticks ("0.0564") must fit it too.
    ticks = trace.get("colorbar", {}).get("ticktext") or [""]
    bar_chars = max(box.bar_least, *(len(t) for t in ticks))
    if box.phone:  # the colour bar lies under the plot, the axes' names above it
        room = Room(top, y_px + 8, 6, band=band)
        # the axes' names, then the bar: its title, the bar and its numbers
        under = 1.6 * f + (18 + 3.6 * f if shows_bar else 4)
    else:  # the colour bar stands at the right, the axes' names upright at the left
        right = 16 + 12 + bar_chars * 0.7 * f + 1.6 * f + 8 if shows_bar else 16
        room, under = Room(top, y_px + 8 + 1.6 * f, right, band=band), 0
    width = box.width - room.left - room.right
    # The x labels stand clear of the lowest query label, which reaches below the plot.
    room.standoff = math.ceil(0.7 * f) + 2

    def fit(labels_h: float) -> None:  # the cells' side with x labels ``labels_h`` px tall
        room.bottom = labels_h + under
        room.cell = width / n_x
        if box.height is not None:
            room.cell = min(room.cell, (box.height - top - room.bottom) / n_y)
        room.step = step_for(room.cell, f)
        room.flat = x_px + 6 <= room.cell * room.step

    fit(x_px + room.standoff + 4)  # upright x labels: their whole length under the plot
    if room.flat:  # flat ones fit: the room upright ones would take goes to the cells
        fit(1.6 * f + room.standoff)
    return room


def title_room(box: Box) -> float:
    """px a line of a page's title may take: a longer line is broken (viz.measure.wrap)."""
    return 0.98 * box.width - 12 if box.phone else box.width - 12


def _fit_title(trace, title: str, box: Box, shows_bar: bool, room: Room, spare: float):
    """(title, room) on a page: a figure narrower than its title gets the title's width in its
    right margin; a title wider than the page is wrapped to it (and the room laid out again)."""
    need = max((text_px(line, box.title) for line in title.split("<br>")), default=0) + 12
    if need > box.width:
        title = wrap(title, title_room(box), box.title)
        return title, _room(trace, title, box, shows_bar, room.tallest)
    room.right += max(0.0, need - (box.width - spare))
    return title, room


def _as_drawn(title: str, box: Box) -> str:
    """A title broken into lines as ``square`` breaks it in ``box``: to a phone's width, to a
    page's where wider than the page (_fit_title), never where presented."""
    if box.phone:
        return wrap(title, title_room(box), box.title)
    need = max((text_px(line, box.title) for line in title.split("<br>")), default=0) + 12
    if box.centre or need <= box.width:
        return title
    return wrap(title, title_room(box), box.title)


def _tallest(layout: dict, box: Box) -> str:
    """Of the titles any head of the head view can have (``meta.title_tallest``: the head parts
    with the most lines, viz.attention.tallest_titles, each followed by this title's rest), the
    one with the most lines as drawn in ``box``; "" for another figure. The head switch draws
    another head in the layout of the first (ui/js/head_switch.js): its title must fit it."""
    meta, title = layout.get("meta") or {}, layout.get("title", {}).get("text", "")
    head = meta.get("title_head")
    if not head or not title.startswith(head):
        return ""
    rest = title[len(head) :]
    drawn = [_as_drawn(part + rest, box) for part in meta.get("title_tallest") or []]
    return max(drawn, key=lambda t: title_px(t, box.title), default="")


def _phone_bar(bar: dict, plot_h: float, bottom: float) -> dict:
    """A colour bar under the plot, across it: the cells keep the figure's width."""
    bar.update(
        orientation="h",
        x=0.5,
        xanchor="center",
        # its foot 4 px above the figure's bottom, in the plot's height (a container y put the
        # bar's title over the bar: Plotly 7.1, seen in Chromium)
        y=-(bottom - 4) / plot_h,
        yanchor="bottom",
        yref="paper",
        len=0.92,  # its end labels stay inside the figure
        lenmode="fraction",
        thickness=10,
        xpad=0,
        ypad=4,
    )
    bar["title"]["side"] = "top"
    return bar


def _phone_title_font(layout: dict, box: Box) -> dict:
    """A phone's title at the box's size (the page's is the figure's own)."""
    if not box.phone:
        return {}
    return {"font": {**layout.get("title", {}).get("font", {}), "size": box.title}}


def _square_axes(layout: dict, xs: list, ys: list, room: Room, box: Box) -> dict:
    """A square map's axes: ranges of their own (the axes are laid out without the cells, as a
    figure drawn before the page has filled its numbers is), the first query at the top, square
    cells, the labels thinned, both axes named in one line (beside the plot, or under it on a
    phone)."""
    titles = [layout[key].get("title", {}).get("text", "") for key in ("yaxis", "xaxis")]
    both = "{} ↓ · {} →".format(*titles)
    return {
        "xaxis": {
            **layout["xaxis"],
            "range": [-0.5, len(xs) - 0.5],
            "autorange": False,
            "constrain": "domain",
            **Ticks(room.step, 0 if room.flat else -90).props(xs, box.x_chars, box.font),
            "ticklabelstandoff": room.standoff,
            "title": {"text": both if box.phone else ""},
        },
        "yaxis": {
            **layout["yaxis"],
            "range": [len(ys) - 0.5, -0.5],
            "autorange": False,
            "constrain": "domain",
            "scaleanchor": "x",
            **Ticks(room.step, 0).props(ys, box.y_chars, box.font),
            "title": {"text": "" if box.phone else both},
        },
    }


def square(data: list[dict], layout: dict, box: Box) -> tuple[dict, dict | None]:
    """A square map's (layout changes, its colour bar or None) for ``box``: the cells as large as
    the room allows, the labels thinned to what fits at the box's font, the margins what they
    hold."""
    trace, f = data[0], box.font
    xs, ys = list(trace["x"]), list(trace["y"])
    title = layout.get("title", {}).get("text", "")
    if box.phone:
        title = wrap(title, title_room(box), box.title)
    shows_bar = trace.get("showscale", True) is not False  # a mask's colours are in its title
    tallest = _tallest(layout, box)
    room = _room(trace, title, box, shows_bar, tallest)
    room.tallest = tallest
    # The plot area as wide as its cells, so that the colour bar stands beside them (a wider
    # area would leave it at the figure's far edge): presented, the square stands in the
    # middle of the screen; on the page, the figure is only as wide as it needs, and its
    # title wrapped to that width.
    spare = max(0.0, box.width - room.left - room.right - room.cell * len(xs))
    if not box.phone and not box.centre:
        # the figure as wide as its title too (its room at the right: the bar stays beside
        # the cells), the title wrapped only where the page is narrower than it
        title, room = _fit_title(trace, title, box, shows_bar, room, spare)
        spare = max(0.0, box.width - room.left - room.right - room.cell * len(xs))
    height = box.height if box.height is not None else room.top + room.cell * len(ys) + room.bottom
    if box.centre:
        room.left, room.right = room.left + spare / 2, room.right + spare / 2
    margin = {"t": room.top, "l": room.left, "r": room.right, "b": room.bottom}
    changes = {
        "height": round(height),
        "width": round(box.width if box.centre else box.width - spare),
        "margin": {**{k: round(v) for k, v in margin.items()}, "pad": 0},
        "title": {
            **layout.get("title", {}),
            **_phone_title_font(layout, box),
            "text": title,
            "yref": "container",
            # Plotly stands the first line's baseline on y
            "y": 1 - (6 + room.band + box.title) / height,
            "yanchor": "top",
        },
        **_square_axes(layout, xs, ys, room, box),
    }
    if not shows_bar:
        return changes, None
    bar = {**trace.get("colorbar", {}), "tickfont": {"size": f}}
    bar["title"] = {**bar.get("title", {}), "font": {"size": f}}
    if not box.phone:
        return changes, bar
    return changes, _phone_bar(bar, room.cell * len(ys), room.bottom)


def head_titles(meta: dict, title: str, drawn: str, box: Box) -> dict:
    """What the browser's head switch builds another head's title from (ui/js/head_switch.js),
    for the head view laid out in ``box``: its ``title`` (``drawn``: as the page draws it) starts
    with the part that names the head (``meta.title_head``, the switch payload's title of that
    head), and the rest (notes, the slide's line) starts a line of its own, so any head's title
    as this page would draw it is that head's part wrapped to ``title_wrap`` ([px a line may
    take, the title's font px]) followed by ``title_rest``, the rest as drawn here. Nothing for
    a title of another shape: the switch then leaves such a head to the server."""
    head = meta.get("title_head")
    if not head or not title.startswith(head):
        return {}
    rest = title[len(head) :]
    if rest and not rest.startswith("<br>"):
        return {}
    room = title_room(box)
    if rest and drawn != title:  # the page's title was broken over lines: its rest as well
        rest = "<br>" + wrap(rest[len("<br>") :], room, box.title)
    return {"title_wrap": [room, box.title], "title_rest": rest}


def boxes(screen: Screen) -> tuple[Box, list[Box]]:
    """(the page's box, the presented ones from the largest text to the smallest) for a
    screen; none for a page that is not presenting (a phone never is)."""
    if screen.phone:
        font = 10
        chars = max(4, int((0.16 * screen.width - 8) / (0.62 * font)))
        return Box(screen.width, None, font, 12, chars, chars, phone=True), []
    page = Box(screen.width, None, 12, 15, 14, 14)
    if not screen.presented:
        return page, []
    width = screen.window_width - PRESENT_PAD
    height = screen.window_height - PRESENT_BAR
    # the back row reads 1/60 of the screen's height (13 px at 720p, 18 at 1080p) and better
    least, most = max(13, round(screen.window_height / 60)), round(screen.window_height / 40)
    fonts = range(most, least - 1, -1)
    return page, [Box(width, height, f, round(1.2 * f), 14, 10, centre=True) for f in fonts]


def presented(data: list[dict], layout: dict, candidates: list[Box]) -> tuple[dict, dict, Box]:
    """The presented layout with the largest text whose map still takes PRESENT_SHARE of the
    window (a long text's labels take room: its text is smaller), else with the smallest."""
    for box in candidates:
        big, bar = square(data, layout, box)
        m, n_x, n_y = big["margin"], len(data[0]["x"]), len(data[0]["y"])
        cell = min((big["width"] - m["l"] - m["r"]) / n_x, (big["height"] - m["t"] - m["b"]) / n_y)
        plot = cell * n_y
        if plot >= PRESENT_SHARE * (box.height + PRESENT_BAR) or box is candidates[-1]:
            return big, bar, box
    raise ValueError("no box to present in")


def room_of(screen: Screen) -> tuple[int, int, int]:
    """(width, height, text px) of the window a figure is presented in: the text 1/54 of the
    window's height, 18 px at least."""
    height = screen.window_height - PRESENT_BAR
    return screen.window_width - PRESENT_PAD, height, max(18, round(screen.window_height / 54))


def under(below: list | None, screen: Screen) -> int:
    """px a presented figure leaves under it for the text the page shows there
    (``layout.meta.present_below``: [most px, most share of the window's height], the limits
    of that text's box in the page's style; the step card of Inside a layer), with its gaps."""
    if not below:
        return 0
    most_px, share = below
    return round(min(most_px, share * screen.window_height)) + 10


def _square_slide(data: list[dict], layout: dict) -> dict:
    """A square map saved as a slide (``viz.present.SLIDE``): as tall as the slide, only as wide
    as its plot and colour bar (the image is the map, not a strip of a wide card)."""
    width, height, font = SLIDE
    # a slide is saved as drawn: room for the longest ticks a head's bar shows ("0.00123")
    box = Box(width, height, font, round(1.2 * font), 14, 10, toolbar=False, bar_least=7)
    big, bar = square(data, layout, box)
    big["title"]["font"] = {**big["title"].get("font", {}), "size": box.title}
    big.update(autosize=False, font={"size": font})
    return {"layout": big, "colorbars": [bar]}


def _not_presented(meta: dict, screen: Screen) -> None:
    """A phone in presentation mode draws its figures as on its page: ``meta.present`` null
    tells it so (absent, the page would ask for the presented layout)."""
    if screen.presenting and screen.phone:
        meta["present"] = None


def lay_out(figure: dict, screen: Screen | None) -> dict:
    """A figure ({"data", "layout"}, plain JSON) laid out for ``screen``, in place: its own
    layout for the page (``square`` for a declared square map, else viz.fit), ``meta.present``
    for the window it is presented in (a presenting page's) and ``meta.slide`` for a 16:9 slide
    (viz.present). A page that reported no screen (an API client) gets the figure as it is."""
    layout, data = figure["layout"], figure["data"]
    meta = layout.get("meta") or {}
    if screen is None or not data:
        return figure
    if meta.get("fit") != "square":
        # a figure in a column of the tab's row (meta.share: its part of the width) on a page
        # wide enough for the row; a phone stacks the columns
        share = 1.0 if screen.phone else float(meta.get("share") or 1.0)
        # its own narrow layout first: a slide of it is saved as the page shows it
        narrowed = take_narrow(data, layout, screen.width * share, screen.presented)
        rooms = {"slide": in_room(data, layout, *SLIDE)}
        window = [screen.window_width, screen.window_height]
        if screen.presented:
            width, height, font = room_of(screen)
            height -= under(meta.get("present_below"), screen)
            rooms["present"] = {**in_room(data, layout, width, height, font), "window": window}
        lay_out_general(data, layout, screen.width * share, screen.phone, narrowed)
        layout["meta"] = {**(layout.get("meta") or {}), "laid_out": True, **rooms}
        _not_presented(layout["meta"], screen)
        return figure
    slide = _square_slide(data, layout)
    page, present = boxes(screen)
    if not page.phone:  # the page keeps the height the figure chose; the width is the page's
        top = int(layout.get("margin", {}).get("t") or 0)
        page = Box(page.width, layout["height"], page.font, page.title, 14, 14, top=top)
    changes, bar = square(data, layout, page)
    title = layout.get("title", {}).get("text", "")
    switch = head_titles(meta, title, changes["title"]["text"], page)
    meta = {**meta, "laid_out": True, "slide": slide, **switch}
    meta.pop("title_head", None)  # (the page needs only what head_titles made of it)
    meta.pop("title_tallest", None)
    if present:
        big, big_bar, box = presented(data, layout, present)
        big["title"]["font"] = {**big["title"].get("font", {}), "size": box.title}
        big.update(autosize=False, font={"size": box.font})
        window = [screen.window_width, screen.window_height]
        meta["present"] = {"layout": big, "colorbars": [big_bar], "window": window}
    _not_presented(meta, screen)
    figure["layout"] = {**layout, **changes, "meta": meta}
    if bar is not None:
        data[0]["colorbar"] = bar
    return figure
