"""The wire format: figures' numbers sent packed to a page that unpacks them (ui/js/fill.js).

docs/wire-format.md is the specification, with a test vector (tests/wire_vector.json) that the
Python tests and the browser test both decode. Two things travel this way, both only to a page
that says it can decode them (its stamp: ``client.fills``); API clients and the lecture deck's
files get every figure complete.

- The head switch payload (``switch_payload``): every head of a stack as the head view shows it,
  once per run, so the page redraws a layer or head change itself; the head and compare figures
  then come without their numbers (``without_z``) and the page fills them from it.
- A figure's own numbers (``packed``): the overview's percent tiles ("byte") and the attention
  block's norms ("milli"), in ``layout.meta.packed``.

A number is sent as the hover prints it (".3f"), a ``milli`` code: round(w·1000) as uint16, halves
up as JavaScript's toFixed rounds, NAN_CODE for a cell the mask hides. Codes are sent as two
planes, every high byte then every low byte (they compress apart far better), deflated (a zlib
stream) and base64-encoded.
"""

from __future__ import annotations

import base64
import zlib
from typing import Literal

import numpy as np
import plotly.graph_objects as go

NAN_CODE = 65535  # the code of a cell the mask hides (shown as a gap, or as the figure says)


def milli(weights: np.ndarray) -> np.ndarray:
    """Numbers as the hover prints them (".3f"), as integers: round(w·1000), halves up as
    JavaScript's toFixed rounds; NAN_CODE where the number is NaN (hidden). uint16, so only for
    numbers in [0, 65.534] (see ``codes_fit``)."""
    codes = np.floor(weights.astype(np.float64) * 1000 + 0.5)
    return np.where(np.isnan(weights), NAN_CODE, codes).astype(np.uint16)


def codes_fit(weights: np.ndarray) -> bool:
    """Whether every number has a ``milli`` code (norms of an unusual model may not)."""
    return np.nanmax(weights, initial=0.0) * 1000 < NAN_CODE - 0.5 and (
        np.nanmin(weights, initial=0.0) >= 0
    )


def deflated(raw) -> str:
    """Bytes as the page's decoder reads them (DecompressionStream("deflate"): a zlib stream),
    base64. Runs of one byte only (zlib's Z_RLE strategy): on the head switch codes at 128 tokens
    that is 12 % smaller than level 1's matching and as fast; level 6 is 11 % smaller but 4× slower,
    a cost every Run on the Attention tab would pay."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 15, 8, zlib.Z_RLE)
    return base64.b64encode(packer.compress(raw) + packer.flush()).decode("ascii")


# ---------------------------------------------------------------- the head switch payload


class SwitchCodes:
    """The head switch payload's codes, filled a few heads at a time: (2, N, cols, rows) uint8,
    the high-byte plane then the low-byte plane, each head stored key by key (column-major: ~5 %
    smaller deflated), N = layers · heads in layer order."""

    def __init__(self, n: int, rows: int, cols: int) -> None:
        self.planes = np.empty((2, n, cols, rows), np.uint8)  # high bytes, then low

    def put(self, start: int, cells: np.ndarray) -> bool:
        """Heads start … start + len(cells) - 1 from float32 (n, rows, cols), NaN = hidden;
        False (nothing written) when a number has no code."""
        if not codes_fit(cells):
            return False
        codes = milli(cells).transpose(0, 2, 1)  # (n, cols, rows): key-major
        self.planes[0, start : start + len(cells)] = codes >> 8
        self.planes[1, start : start + len(cells)] = codes & 0xFF
        return True

    def data(self) -> str:
        return deflated(self.planes)


def switch_payload(
    layers: int,
    heads: int,
    codes: SwitchCodes,
    zmax: list[float],
    titles: list[str],
    bars: list[str],
    ticks: list[list[str]],
) -> dict:
    """The head switch payload: {"layers", "heads", "rows", "cols", "zmax", "titles", "bars",
    "ticks": [layer][head], "data": the codes deflated}; per head (N = layers · heads, layer
    order) its colour range, the head-specific part of its title, its colour bar's title and its
    colour bar's tick labels (at 0, ¼, ½, ¾ and all of the range). The Attention tab adds "id"
    and "run" (ui/tabs/attention.py)."""
    _, n, cols, rows = codes.planes.shape
    assert n == layers * heads == len(zmax) == len(titles) == len(bars) == len(ticks)

    def per_layer(values: list) -> list[list]:
        return [values[i : i + heads] for i in range(0, n, heads)]

    return {
        "layers": layers,
        "heads": heads,
        "rows": rows,
        "cols": cols,
        "zmax": per_layer(zmax),
        "titles": per_layer(titles),
        "bars": per_layer(bars),
        "ticks": per_layer(ticks),
        "data": codes.data(),
    }


def without_z(fig: go.Figure, data_id: str, cells: list[list[int]], hidden: float | None):
    """The figure without its heatmaps' numbers, for a page that holds the head switch data
    ``data_id``: ``layout.meta["fill"]`` names, trace by trace, the head it shows ([layer, head])
    or the difference it shows ([layer_a, head_a, layer_b, head_b]: A − B of the shown numbers),
    and what a hidden cell shows (None: a gap); the page rebuilds each z from the data before
    Plotly draws. The caller checks that the data covers exactly these cells."""
    assert len(cells) == len(fig.data)
    for cells_trace in fig.data:
        cells_trace.z = None
    fig.layout.meta = {
        **(fig.layout.meta or {}),
        "fill": {"data": data_id, "z": cells, "hidden": hidden},
    }
    return fig


# ---------------------------------------------------------------- a figure's own numbers


def packed(fig: go.Figure, kind: Literal["milli", "byte"]) -> go.Figure:
    """The figure with its heatmaps' numbers packed, for a page that fills figures (it unpacks
    them before Plotly draws): every heatmap's z and 2-D customdata, row by row, deflated into
    ``layout.meta["packed"]`` = {"kind", "cells": [[trace, field, rows, cols], …], "data",
    "same_xy"}.

    kind "milli": each number as the hover prints it (".3f"), ``milli`` codes as two byte planes
    (all high bytes, then all low): the page shows exactly the hover numbers of the full figure
    and colours within 0.0005 of them (the full figure, unchanged, when a number has no code);
    "byte": uint8 numbers as they are. same_xy: every packed trace after the first had the
    first's x and y, which the page copies back.
    """
    cells, arrays = [], []
    for i, cells_trace in enumerate(fig.data):
        if cells_trace.type != "heatmap":
            continue
        for field in ("z", "customdata"):
            values = getattr(cells_trace, field)
            if values is None or np.ndim(values) != 2:
                continue
            values = np.asarray(values)
            if kind == "byte" and values.dtype != np.uint8:
                raise ValueError(f"byte packing takes uint8, not {values.dtype}")
            cells.append([i, field, *values.shape])
            arrays.append(values)
    if not arrays or (kind == "milli" and not all(codes_fit(a) for a in arrays)):
        return fig
    if kind == "milli":
        codes = np.concatenate([milli(a).ravel() for a in arrays])
        raw = np.concatenate([codes >> 8, codes & 0xFF]).astype(np.uint8)
    else:
        raw = np.concatenate([a.ravel() for a in arrays])
    traces = [fig.data[i] for i in dict.fromkeys(i for i, *_ in cells)]
    same_xy = len(traces) > 1 and all(
        np.array_equal(t.x, traces[0].x) and np.array_equal(t.y, traces[0].y) for t in traces[1:]
    )
    with fig.batch_update():
        for i, field, *_ in cells:
            fig.data[i][field] = None
        if same_xy:
            for cells_trace in traces[1:]:
                cells_trace.x = cells_trace.y = None
    fig.layout.meta = {
        **(fig.layout.meta or {}),
        "packed": {"kind": kind, "cells": cells, "data": deflated(raw), "same_xy": same_xy},
    }
    return fig
