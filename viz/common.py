"""Shared pieces of every view: safe token labels, one heatmap recipe, figure layout, captions.

Plotly draws labels and hover text as a small HTML dialect, so every piece of user text is escaped
here, once, before it reaches a figure. Repeated tokens ("the" twice) would merge into one category
on a Plotly axis; labels therefore carry their position ("3·the") and stay distinct.
"""

from __future__ import annotations

import base64
import functools
import html
import re
import unicodedata

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

MAX_LABEL_CHARS = 14
FONT = "Inter, system-ui, -apple-system, Segoe UI, Roboto, Noto Sans, Noto Sans CJK SC, sans-serif"
ATTENTION_SCALE = "Blues"
DIVERGING_SCALE = "RdBu_r"  # blue negative, red positive, white zero
SEQUENTIAL_SCALE = "Viridis"


def _white_template() -> go.layout.Template:
    """Plotly's "plotly_white" for the traces and layouts these views use: the same look, at a
    third of the cost per figure (5.2 -> 1.7 ms) and a fifth of its bytes (7.2 -> 1.6 kB). The
    full template also styles 3-D scenes, maps, polar and ternary plots and 40 trace types."""
    white = pio.templates["plotly_white"].to_plotly_json()
    unused = ("polar", "ternary", "scene", "geo", "colorscale")
    layout = {k: v for k, v in white["layout"].items() if k not in unused}
    data = {k: white["data"][k] for k in ("heatmap", "scatter", "bar")}
    return go.layout.Template(layout=layout, data=data)


TEMPLATE = "ta_white"
pio.templates[TEMPLATE] = _white_template()
# Every figure starts from it (a figure otherwise builds Plotly's full default template first,
# ~5 ms each).
pio.templates.default = TEMPLATE


def head_label(config, head: int) -> str:
    """A head's name in titles: "5", or "5 (kv 1)" under grouped-query attention, where query
    head 5 reads key/value head 1 with the other heads of its group (LLaMA's repeat_kv)."""
    kv_heads = getattr(config, "kv_heads", None)
    if kv_heads is None or kv_heads == config.n_heads:
        return str(head)
    return f"{head} (kv {config.kv_head_of(head)})"


def display_token(token: str, max_chars: int = MAX_LABEL_CHARS) -> str:
    """A token as a reader should see it: whitespace and control characters made visible, long
    tokens shortened with an ellipsis. Not escaped (see ``safe``)."""
    out = []
    for ch in token:
        if ch == " ":
            out.append("␣")
        elif ch == "\n":
            out.append("⏎")
        elif ch == "\t":
            out.append("⇥")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp") and not (
            ch == "\u200d" and len(token) > 1  # a ZWJ inside a token joins its emoji
        ):
            out.append(f"U+{ord(ch):04X}")
        else:
            out.append(ch)
    text = "".join(out) or "∅"
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def visible_text(text: str) -> str:
    """Running text (a greedy continuation) with the characters ``display_token`` names named the
    same way ("U+001C"); its spaces, new lines, tabs and emoji joiners stay as they are."""
    return "".join(
        f"U+{ord(ch):04X}"
        if ch not in " \n\t\u200d"
        and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp")
        else ch
        for ch in text
    )


def safe(text: str) -> str:
    """Escape text for Plotly's label/hover HTML dialect and for gr.HTML alike."""
    # Plotly decodes &lt; &gt; &amp; and numeric entities, not &quot;: write the quote as &#34;.
    return html.escape(text, quote=True).replace("&quot;", "&#34;")


_MD_PUNCT = re.compile(r"([\\`*_\[\]{}()#+!|~])")


def md_literal(text: str) -> str:
    """Text shown as itself inside gr.Markdown (a table cell too): no HTML, emphasis or link."""
    return _MD_PUNCT.sub(r"\\\1", html.escape(str(text), quote=False))


def token_labels(tokens: list[str]) -> list[str]:
    """Distinct, escaped axis labels: "position·token" (e.g. "0·[CLS]", "3·the")."""
    return [safe(f"{i}·{display_token(t)}") for i, t in enumerate(tokens)]


def layout_of(title: str, height: int) -> dict:
    """The common look as a plain layout: white template, tight margins, title left, a fixed
    height (gr.Plot has none). A figure built as plain JSON starts its layout from it."""
    return {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 15}},
        "height": height,
        "margin": {"l": 10, "r": 10, "t": 48, "b": 10},
        "font": {"family": FONT, "size": 12},
    }


class CompactFigure(go.Figure):
    """A go.Figure whose JSON leaves "/" unescaped.

    Plotly's to_json writes "/" as "\\u002f" (six characters) so that its JSON can sit inside an
    HTML <script>; base64 typed arrays are full of "/", which inflates a heatmap's payload by
    10-60 %. gr.Plot sends the JSON inside a JSON response, never as raw HTML; "<" and ">" stay
    escaped anyway.
    """

    def to_json(self, *args, **kwargs) -> str:
        return super().to_json(*args, **kwargs).replace("\\u002f", "/")


def compact_json(figure: dict) -> str:
    """A figure's plain JSON ({"data", "layout"}, as ``to_plotly_json`` gives it) written as
    CompactFigure writes it, without validating it again."""
    return pio.to_json(figure, validate=False).replace("\\u002f", "/")


@functools.cache
def template_json() -> dict:
    """The figures' template as plain JSON: what Plotly puts in a figure's layout when it
    writes it (``to_plotly_json``). Shared: never changed in place."""
    return pio.templates[TEMPLATE].to_plotly_json()


# numpy dtypes Plotly.js reads as typed arrays, by its short names
TYPED = {"int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2", "int32": "i4"}
TYPED |= {"uint32": "u4", "float32": "f4", "float64": "f8"}


def typed_arrays(value):
    """Plain JSON with its numpy arrays written as Plotly.js's base64 typed arrays ({"dtype",
    "bdata", "shape"}), as ``to_plotly_json`` writes them: figures that skip Plotly's object
    model (its deep copy and its walk over every value cost more than drawing them). A 64-bit
    integer array is sent as 32-bit (plotly.js reads no 64-bit integers)."""
    if isinstance(value, np.ndarray):
        if value.dtype == np.int64:
            value = value.astype(np.int32)
        array = {"dtype": TYPED[str(value.dtype)]}
        array["bdata"] = base64.b64encode(np.ascontiguousarray(value)).decode("ascii")
        if value.ndim > 1:
            array["shape"] = ", ".join(map(str, value.shape))
        return array
    if isinstance(value, dict):
        return {k: typed_arrays(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [typed_arrays(v) for v in value]
    if isinstance(value, np.integer | np.floating):
        return value.item()
    return value


def figure(data: list[dict], layout: dict) -> go.Figure:
    """A figure from plain Plotly JSON (traces and layout as dicts), taken as it is.

    Plotly's object model checks and copies every property it is given, and every update parses
    its paths: building a tab's figures that way was most of a tab switch's server time. Figures
    built here skip it (``_validate=False``); tests/test_plain_figures.py has Plotly validate each
    of them and checks that the JSON reads the same."""
    for part in [*data, *(trace["marker"] for trace in data if "marker" in trace)]:
        if isinstance(part.get("colorscale"), str):
            part["colorscale"] = colorscale(part["colorscale"])
    for key, axis in layout.items():
        if key.startswith("coloraxis") and isinstance(axis.get("colorscale"), str):
            axis["colorscale"] = colorscale(axis["colorscale"])
    return CompactFigure(data=data, layout=layout, _validate=False)


@functools.cache
def colorscale(name: str) -> tuple:
    """A named colour scale ("Blues", "RdBu_r") as the stops Plotly's validator writes for it:
    Plotly.js knows neither every name nor the "_r" suffix, which only plotly.py reads."""
    return go.Heatmap(colorscale=name).colorscale


def heatmap(
    z: np.ndarray,
    x_labels: list[str],
    y_labels: list[str],
    *,
    x_title: str,
    y_title: str,
    value_name: str,
    colorscale: str = ATTENTION_SCALE,
    zmin: float | None = None,
    zmax: float | None = None,
    zmid: float | None = None,
    fmt: str = ".3f",
    showscale: bool = True,
) -> dict:
    """A heatmap trace, as plain JSON, whose hover reads "<y_title> <label> → <x_title> <label>:
    value".

    z is sent as a float32 typed array (Plotly 7 encodes numpy arrays as base64, 4 bytes a cell).
    Labels must already be escaped (token_labels does it).
    """
    z = np.asarray(z, dtype=np.float32)
    trace = dict(
        type="heatmap",
        z=z,
        x=x_labels,
        y=y_labels,
        colorscale=colorscale,
        zmin=zmin,
        zmax=zmax,
        zmid=zmid,
        showscale=showscale,
        hovertemplate=(
            f"{safe(y_title)} %{{y}}<br>{safe(x_title)} %{{x}}<br>"
            f"{safe(value_name)} %{{z:{fmt}}}<extra></extra>"
        ),
    )
    return {key: value for key, value in trace.items() if value is not None}  # None: unset


def square_axis_props(n_x: int, n_y: int) -> tuple[dict, dict]:
    """(x axis, y axis) of a map of tokens: categorical axes with the first token at the
    top-left, ticks thinned for long texts."""
    step = max(1, int(np.ceil(max(n_x, n_y) / 48)))
    x = {"type": "category", "tickangle": -60, "nticks": max(2, n_x // step)}
    y = {"type": "category", "autorange": "reversed", "nticks": max(2, n_y // step)}
    return x, y


def stack_tokens(trace, stack: str, batch: int = 0) -> tuple[list[str], list[str]]:
    """(query tokens, key tokens) of one batch item of a stack, padding removed."""
    q_all, k_all = trace.tokens_for(stack)
    src_len = int(trace.attention_mask[batch].sum())
    tgt_mask = trace.tgt_attention_mask if trace.tgt_attention_mask is not None else None
    tgt_len = int(tgt_mask[batch].sum()) if tgt_mask is not None else src_len
    n_q = src_len if stack == "encoder" else tgt_len
    n_k = src_len if stack in ("encoder", "cross") else tgt_len
    return q_all[batch][:n_q], k_all[batch][:n_k]


def axis_key(name: str) -> str:
    """A trace's axis name ("x3") as the layout's key ("xaxis3")."""
    return f"{name[0]}axis{name[1:]}"


def grid(
    rows: int,
    cols: int,
    *,
    h_space: float | None = None,
    v_space: float | None = None,
    titles: list[str] = (),
    title_size: int = 16,
    row_heights: list[float] | None = None,
) -> tuple[dict, list[tuple[str, str]]]:
    """``make_subplots``' grid as plain layout: (the layout's axes and panel titles, each panel's
    (x axis, y axis) names row by row, top row first). The same domains and titles as
    ``make_subplots(rows, cols, horizontal_spacing, vertical_spacing, subplot_titles)``, built
    in microseconds instead of ~30 ms (a tab's figures are a third of a tab switch's server
    time)."""
    h_space = 0.2 / cols if h_space is None else h_space
    v_space = 0.3 / rows if v_space is None else v_space
    width = (1 - h_space * (cols - 1)) / cols
    shares = row_heights or [1.0] * rows  # top row first, as make_subplots takes them
    heights = [(1 - v_space * (rows - 1)) * h / sum(shares) for h in shares]
    layout: dict = {"annotations": []}
    cells = []
    for r in range(rows):
        height = heights[r]
        y1 = 1 - sum(heights[:r]) - r * v_space
        for c in range(cols):
            n = r * cols + c + 1
            suffix = "" if n == 1 else str(n)
            x0 = c * (width + h_space)
            x_domain = [round(max(0.0, x0), 12), round(min(1.0, x0 + width), 12)]  # in [0, 1]
            y_domain = [round(max(0.0, y1 - height), 12), round(min(1.0, y1), 12)]
            layout[f"xaxis{suffix}"] = {"domain": x_domain, "anchor": f"y{suffix}"}
            layout[f"yaxis{suffix}"] = {"domain": y_domain, "anchor": f"x{suffix}"}
            cells.append((f"x{suffix}", f"y{suffix}"))
            if n <= len(titles) and titles[n - 1]:
                layout["annotations"].append(
                    {
                        "text": titles[n - 1],
                        "x": x0 + width / 2,
                        "y": y1,
                        "xref": "paper",
                        "yref": "paper",
                        "xanchor": "center",
                        "yanchor": "bottom",
                        "showarrow": False,
                        "font": {"size": title_size},
                    }
                )
    return layout, cells
