"""bertviz's head view and model view as a self-contained, offline ``<iframe srcdoc>``.

bertviz 1.4.1's own ``head_view`` / ``model_view`` pull require.js, d3 5.7 and jQuery 2 from a
CDN (so offline they draw an empty "Layer:" select) and embed the attention JSON twice, growing as
T²·L·H. This module builds the page itself:

* bertviz's own ``head_view.js`` / ``model_view.js`` are read from the installed bertviz package
  at run time, unchanged except that the ``PYTHON_PARAMS`` marker becomes a variable built by our
  loader;
* the d3 parts they use come from two small vendored files in ``assets/vendor/`` (d3-selection
  1.4.2 and d3-color 1.4.1, the modules d3 5.7 bundles; BSD-3-Clause). ``d3.scaleOrdinal`` /
  ``d3.schemeCategory10`` (the only other d3 names bertviz uses), the handful of jQuery calls
  bertviz makes and ``require.config`` / ``requirejs`` are a few lines of shim here, so nothing is
  loaded from the network;
* the attention is embedded once, quantised to one byte per weight (``round(p·255)``, error
  ≤ 0.002, about the resolution at which the browser draws line opacities anyway) as base64; the
  sentence-pair sub-blocks bertviz offers are cut in the browser instead of being shipped again.

Everything the user typed (tokens) is JSON inside a ``<script type="application/json">`` with
``<``, ``>``, ``&`` and U+2028/U+2029 escaped, drawn by bertviz with ``textContent``; the whole
document goes into ``srcdoc`` through ``html.escape(quote=True)`` and the iframe is
``sandbox="allow-scripts"`` (an opaque origin that cannot reach the host page).
"""

from __future__ import annotations

import base64
import functools
import html
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from lang import tr

__all__ = ["bertviz_iframe", "bertviz_document", "DEFAULT_MAX_TOKENS", "VIEWS"]

VIEWS = ("head", "model")
# Per-view token caps. The head view draws H·n² SVG lines for one layer at a time; the model view
# draws L·H·n² at once, so its cap is lower: past them a browser takes seconds to draw the page.
DEFAULT_MAX_TOKENS = {"head": 64, "model": 32}

_VENDOR = Path(__file__).resolve().parent.parent / "assets" / "vendor"
_VENDOR_FILES = ("d3-selection-1.4.2.min.js", "d3-color-1.4.1.min.js")
_ROOT_ID = "bertviz"

# The iframe's own scripts, one section each (viz/bertviz_embed.js): "error" (an uncaught error
# shown as text), "shim" (the d3 and jQuery names bertviz uses beyond the vendored d3 parts) and
# "loader" (the embedded attention decoded into bertviz's params).
_SCRIPTS = Path(__file__).with_suffix(".js")


@functools.cache
def _script(section: str) -> str:
    """One section of viz/bertviz_embed.js: from its "==== name ====" line to the next."""
    text = _SCRIPTS.read_text(encoding="utf-8")
    found = re.search(rf"/\* ==== {section} ==== \*/\n(.*?)(?=/\* ==== |\Z)", text, re.S)
    if found is None:
        raise RuntimeError(f"{_SCRIPTS} has no {section!r} section")
    return _inline_js(found[1])


_CSS = """
body { margin: 8px; font-family: 'Helvetica Neue', Helvetica, Arial, sans-serif; color: #222;
       background: #fff; }
.bv-note { font-size: 13px; line-height: 1.4; background: #fff7e0; border: 1px solid #e6c200;
           border-radius: 4px; padding: 6px 10px; margin: 0 0 8px 0; max-width: 960px; }
#bv-error { display: none; font-size: 13px; color: #a00; background: #fee; border: 1px solid #d99;
            padding: 6px 10px; margin: 0 0 8px 0; }
select { font-size: 13px; }
"""


def _script_json(obj: Any) -> str:
    """JSON that is inert inside an HTML ``<script>`` element (no ``</script>``, no ``<!--``)."""
    text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"))
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _inline_js(code: str) -> str:
    """Make JS safe to inline in ``<script>`` (defensive: none of the current files need it)."""
    return code.replace("</script", "<\\/script").replace("<!--", "<\\!--")


@functools.cache
def _vendor_js() -> str:
    parts = []
    for name in _VENDOR_FILES:
        path = _VENDOR / name
        if not path.is_file():
            raise FileNotFoundError(
                f"vendored script missing: {path} (see assets/vendor/README.md)"
            )
        parts.append(_inline_js(path.read_text(encoding="utf-8")))
    return "\n".join(parts)


@functools.cache
def _bertviz_js(view: str) -> str:
    spec = importlib.util.find_spec("bertviz")  # locate without importing (bertviz imports IPython)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("bertviz is not installed: pip install bertviz==1.4.1")
    path = Path(next(iter(spec.submodule_search_locations))) / f"{view}_view.js"
    code = path.read_text(encoding="utf-8")
    if "PYTHON_PARAMS" not in code:
        raise RuntimeError(f"{path} has no PYTHON_PARAMS marker; unsupported bertviz version")
    return _inline_js(code.replace("PYTHON_PARAMS", "window.__bertvizParams"))


def _prettify(tokens: list[str]) -> list[str]:
    # bertviz's format_special_chars (byte-level BPE / sentencepiece / </w> markers).
    return [str(t).replace("Ġ", " ").replace("▁", " ").replace("</w>", "") for t in tokens]


def _to_numpy(attention: Any) -> np.ndarray:
    if hasattr(attention, "detach"):  # torch.Tensor, without importing torch here
        attention = attention.detach().to("cpu").float().numpy()
    arr = np.asarray(attention, dtype=np.float32)
    if arr.ndim != 4 or arr.shape[2] != arr.shape[3]:
        raise ValueError(f"attention must be [L, H, T, T] for one batch item, got {arr.shape}")
    return arr


def _content_height(view: str, n: int, n_layers: int, n_heads: int) -> int:
    """Pixel height of what bertviz draws (its own formulas) plus its select row."""
    if view == "head":
        return int(n * 22.5 + 30) + 34
    thumb_box = 7 * (12 / n_heads)
    axis = 15 + 5 + 13 + 5
    thumb_h = n * thumb_box + 2 * 5
    detail_h = n * 18 + 2 * 15 + 25
    # + room for a horizontal scrollbar: the model view is a fixed 970 px wide
    return int(max(n_layers * thumb_h + axis, detail_h)) + 34 + 20


def truncation_note(n_total: int, n_shown: int) -> str:
    """Plain-text note shown above the view when the input was cut (reusable in the caller's UI)."""
    return tr(
        "This text has {n_total} tokens; bertviz shows only the first {n_shown}. "
        "Its page grows as tokens² × layers × heads and draws one SVG line per weight, so "
        "longer inputs make it too large and slow for the browser. The lines are the raw "
        "attention weights among those {n_shown} tokens (not renormalised): weight given to "
        "tokens after position {n_shown} is not drawn.",
        n_total=n_total,
        n_shown=n_shown,
    )


def bertviz_document(
    attention: Any,
    tokens: list[str],
    view: str = "head",
    max_tokens: int | None = None,
    sentence_b_start: int | None = None,
    *,
    layer: int | None = None,
    heads: list[int] | None = None,
    display_mode: str = "light",
    prettify_tokens: bool = True,
) -> tuple[str, int]:
    """The standalone HTML document (unescaped) and its natural content height in pixels."""
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
    if display_mode not in ("light", "dark"):
        raise ValueError(f"display_mode must be 'light' or 'dark', got {display_mode!r}")
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS[view]
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    arr = _to_numpy(attention)
    n_layers, n_heads, n_total, _ = arr.shape
    tokens = [str(t) for t in tokens]
    heads = _checked_selection(arr.shape, len(tokens), layer, heads)
    n = min(n_total, int(max_tokens))
    arr = arr[:, :, :n, :n]
    tokens = tokens[:n]
    if prettify_tokens:
        tokens = _prettify(tokens)
    if sentence_b_start is not None and not 0 < int(sentence_b_start) < n:
        sentence_b_start = None  # sentence B starts beyond what is shown: no pair filter
    elif sentence_b_start is not None:
        sentence_b_start = int(sentence_b_start)

    q = np.rint(np.clip(np.nan_to_num(arr, nan=0.0, posinf=1.0, neginf=0.0), 0.0, 1.0) * 255)
    attn_b64 = base64.b64encode(q.astype(np.uint8).tobytes()).decode("ascii")
    params = {
        "shape": [n_layers, n_heads, n],
        "tokens": tokens,
        "sentence_b_start": sentence_b_start,
        "root_div_id": _ROOT_ID,
        "layer": layer,
        "heads": heads,
        "display_mode": display_mode,
    }
    note_html = ""
    if n < n_total:
        note_html = (
            f'<div class="bv-note" id="bv-note">{html.escape(truncation_note(n_total, n))}</div>'
        )
    doc = _page(view, params, attn_b64, note_html, _controls(view, sentence_b_start is not None))
    height = _content_height(view, n, n_layers, n_heads) + 16 + (110 if note_html else 0)
    return doc, height


def _checked_selection(
    shape: tuple[int, ...], n_tokens: int, layer: int | None, heads: list[int] | None
) -> list[int] | None:
    """The heads as ints, once the weights, the tokens, the layer and the heads agree; else a
    ValueError that says which does not."""
    n_layers, n_heads, n_total, _ = shape
    if n_tokens != n_total:
        raise ValueError(f"attention has {n_total} positions but {n_tokens} tokens were given")
    if n_layers == 0 or n_heads == 0 or n_total == 0:
        raise ValueError(f"nothing to show for attention of shape {shape}")
    if layer is not None and not 0 <= layer < n_layers:
        raise ValueError(f"layer {layer} out of range 0..{n_layers - 1}")
    if heads is not None:
        heads = [int(h) for h in heads]
        if not heads or any(not 0 <= h < n_heads for h in heads):
            raise ValueError(f"heads must be a non-empty subset of 0..{n_heads - 1}, got {heads}")
    return heads


def _controls(view: str, pair: bool) -> str:
    """The view's controls above the drawing: the head view's layer, a pair's filter."""
    filter_html = ""
    if pair:
        # bertviz's own filter names, in its order (the loader cuts the blocks in that order)
        names = [
            tr("All"),
            tr("Sentence A -> Sentence A"),
            tr("Sentence B -> Sentence B"),
            tr("Sentence A -> Sentence B"),
            tr("Sentence B -> Sentence A"),
        ]
        options = "".join(
            f'<option value="{i}">{html.escape(s)}</option>' for i, s in enumerate(names)
        )
        filter_html = f'{html.escape(tr("Attention:"))} <select id="filter">{options}</select>'
    layer_html = f'{tr("Layer:")} <select id="layer"></select>' if view == "head" else ""
    return f"{layer_html} {filter_html}"


def _page(view: str, params: dict, attn_b64: str, note_html: str, controls: str) -> str:
    """The standalone document: the note, the controls, the weights and every script inline."""
    return (
        "<!DOCTYPE html>\n"
        '<html><head><meta charset="utf-8"><title>bertviz</title>'
        f"<style>{_CSS}</style></head><body>"
        f'{note_html}<div id="bv-error"></div>'
        f'<div id="{_ROOT_ID}"><span style="user-select:none">{controls}</span>'
        "<div id='vis'></div></div>"
        f'<script type="application/json" id="bv-params">{_script_json(params)}</script>'
        f'<script type="application/octet-stream" id="bv-attn">{attn_b64}</script>'
        f"<script>{_script('error')}</script>"
        f"<script>{_vendor_js()}</script>"
        f"<script>{_script('shim')}</script>"
        f"<script>{_script('loader')}</script>"
        f"<script>{_bertviz_js(view)}</script>"
        f"<script>{_script('fit')}</script>"
        "</body></html>"
    )


def bertviz_iframe(
    attention: Any,
    tokens: list[str],
    view: str = "head",
    max_tokens: int | None = None,
    sentence_b_start: int | None = None,
    height: int | None = None,
    *,
    layer: int | None = None,
    heads: list[int] | None = None,
    display_mode: str = "light",
    prettify_tokens: bool = True,
) -> str:
    """bertviz's head view (``view="head"``) or model view (``view="model"``) as an offline iframe.

    attention: float tensor / ndarray ``[L, H, T, T]`` for one batch item (CPU);
    tokens: ``T`` strings.
    If ``T > max_tokens`` (``None``: ``DEFAULT_MAX_TOKENS[view]``, 64 for the head view, 32 for
    the model view) only the first ``max_tokens`` tokens are shown — the raw sub-block
    ``attention[:, :, :n, :n]``, not renormalised — and a visible note says so and why.
    ``sentence_b_start`` adds bertviz's sentence-pair filter (dropped if sentence B starts beyond
    the shown tokens).
    ``height`` is the iframe height in pixels; ``None`` fits the drawing (no inner scrolling).
    ``layer`` / ``heads`` preselect the head view's layer and heads; ``display_mode`` is the
    model view's palette (bertviz defaults to "dark", we to "light").

    Returns ``<iframe sandbox="allow-scripts" srcdoc="...">`` with the document HTML-escaped, for
    ``gr.HTML``. Weights are sent as one byte each (``round(p·255)``); nothing is fetched from the
    network.
    """
    doc, natural = bertviz_document(
        attention,
        tokens,
        view=view,
        max_tokens=max_tokens,
        sentence_b_start=sentence_b_start,
        layer=layer,
        heads=heads,
        display_mode=display_mode,
        prettify_tokens=prettify_tokens,
    )
    h = natural if height is None else int(height)
    title = "bertviz head view" if view == "head" else "bertviz model view"
    return (
        f'<iframe sandbox="allow-scripts" title="{title}" class="bertviz-frame" '
        f'style="width:100%;height:{h}px;border:0;display:block" '
        f'srcdoc="{html.escape(doc, quote=True)}"></iframe>'
    )
