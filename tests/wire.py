"""The wire format decoded in Python for the tests, written from docs/wire-format.md (not from
viz/wire.py's encoder): what ui/js/fill.js does in the page. Every test that reads a packed figure
or a head switch payload decodes it here."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import numpy as np
import plotly.graph_objects as go

NAN_CODE = 65535  # a hidden cell (docs/wire-format.md)
VECTOR = Path(__file__).with_name("wire_vector.json")


def vector() -> dict:
    """The test vector: a packed figure and a head switch payload with their numbers."""
    return json.loads(VECTOR.read_text(encoding="utf-8"))


def inflated(text: str) -> np.ndarray:
    """A payload's bytes: base64 of a zlib stream."""
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=np.uint8)


def milli_values(planes: np.ndarray) -> np.ndarray:
    """Two byte planes of milli codes (all high bytes, then all low) as the numbers the hover
    shows (code / 1000), NaN where the code is NAN_CODE (a hidden cell)."""
    half = planes.size // 2
    codes = (planes[:half].astype(np.int64) << 8) | planes[half:]
    return np.where(codes == NAN_CODE, np.nan, codes / 1000)


def switch_numbers(data: dict) -> np.ndarray:
    """A head switch payload's numbers, (layers, heads, rows, cols), NaN = hidden."""
    values = milli_values(inflated(data["data"]))
    shape = (data["layers"], data["heads"], data["cols"], data["rows"])  # stored key by key
    return values.reshape(shape).transpose(0, 1, 3, 2)


def unpacked(sent: dict | go.Figure) -> dict:
    """A figure whose numbers came packed (layout.meta.packed), as JSON, as the page draws it:
    each [trace, field, rows, cols] from one inflated stream ("milli": code / 1000 as float32, a
    hidden cell NaN; "byte": the bytes), x and y copied from the first packed trace when same_xy,
    and meta.packed dropped. ``sent`` is left as it was."""
    sent = json.loads(sent.to_json() if isinstance(sent, go.Figure) else json.dumps(sent))
    spec = sent["layout"]["meta"].pop("packed")
    if not sent["layout"]["meta"]:
        del sent["layout"]["meta"]
    raw = inflated(spec["data"])
    total = sum(rows * cols for _, _, rows, cols in spec["cells"])
    if spec["kind"] == "milli":
        assert raw.size == 2 * total
        values = milli_values(raw).astype(np.float32)
    else:
        assert raw.size == total
        values = raw
    at = 0
    for trace, field, rows, cols in spec["cells"]:
        assert field not in sent["data"][trace], "a packed number was sent twice"
        sent["data"][trace][field] = values[at : at + rows * cols].reshape(rows, cols)
        at += rows * cols
    first = spec["cells"][0][0]
    for trace in dict.fromkeys(t for t, *_ in spec["cells"][1:]) if spec["same_xy"] else ():
        if trace != first:
            assert "x" not in sent["data"][trace] and "y" not in sent["data"][trace]
            sent["data"][trace].update(x=sent["data"][first]["x"], y=sent["data"][first]["y"])
    return sent


def filled_like_the_page(fig: go.Figure, data: dict) -> go.Figure:
    """A figure sent without z (layout.meta.fill) as the page fills it from a head switch
    payload: each trace's z from the decoded payload ([layer, head]: its shown numbers, a hidden
    cell as meta.fill.hidden; [la, ha, lb, hb]: the difference of the shown numbers, hidden as
    0), stored as float32 as the page stores them."""
    sent = json.loads(fig.to_json())
    spec = sent["layout"]["meta"]["fill"]
    assert spec["data"] == data["id"]
    assert all("z" not in t for t in sent["data"]), "the slim figure still carries numbers"
    values = switch_numbers(data)  # (L, H, rows, cols), NaN = hidden
    hidden = np.nan if spec["hidden"] is None else spec["hidden"]
    out = go.Figure(fig)
    for trace, cells in zip(out.data, spec["z"], strict=True):
        if len(cells) == 2:
            trace.z = np.where(np.isnan(values[cells[0], cells[1]]), hidden, values[tuple(cells)])
        else:
            code_a = np.nan_to_num(values[cells[0], cells[1]] * 1000, nan=0.0).round()
            code_b = np.nan_to_num(values[cells[2], cells[3]] * 1000, nan=0.0).round()
            trace.z = (code_a - code_b) / 1000
        trace.z = np.asarray(trace.z, dtype=np.float32)
    return out


def numbers(rows: list) -> np.ndarray:
    """The vector's numbers (null = hidden) as float64, NaN = hidden."""
    return np.array(rows, dtype=np.float64)
