"""viz/wire.py against the test vector (tests/wire_vector.json, docs/wire-format.md): the vector
decodes to its numbers, and the encoder writes exactly its bytes from those numbers. The page's
decoder (ui/js/fill.js) reads the same vector in tests/test_viz_attention.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import plotly.graph_objects as go

from tests.wire import inflated, numbers, switch_numbers, unpacked, vector
from viz import wire

DOC = Path(__file__).parents[1] / "docs" / "wire-format.md"


def test_the_packed_figure_of_the_vector_decodes_to_its_numbers():
    v = vector()["packed"]
    shown = unpacked(v["figure"])
    for trace, want in zip(shown["data"], v["numbers"], strict=False):
        np.testing.assert_array_equal(trace["z"], numbers(want).astype(np.float32))
        assert (trace["x"], trace["y"]) == (["a", "b", "c"], ["p", "q"])  # same_xy
    assert "z" not in shown["data"][2]  # the scatter is left alone
    assert "meta" not in shown["layout"]


def test_the_head_switch_payload_of_the_vector_decodes_to_its_numbers():
    v = vector()["switch"]
    np.testing.assert_array_equal(switch_numbers(v["payload"]), numbers(v["numbers"]))


def test_the_encoder_writes_the_vectors_bytes_from_its_numbers():
    """Compared inflated: the planes are the format; zlib's own bytes may differ by version."""
    v = vector()
    sent = v["packed"]["figure"]
    tiles = [
        go.Heatmap(z=numbers(z).astype(np.float32), x=["a", "b", "c"], y=["p", "q"])
        for z in v["packed"]["numbers"]
    ]
    tiles[1].xaxis = "x2"
    fig = wire.packed(go.Figure([*tiles, go.Scatter(x=[1, 2], y=[3, 4])]), "milli")
    mine, theirs = fig.layout.meta["packed"], sent["layout"]["meta"]["packed"]
    assert {**mine, "data": None} == {**theirs, "data": None}
    np.testing.assert_array_equal(inflated(mine["data"]), inflated(theirs["data"]))

    payload = v["switch"]["payload"]
    heads = numbers(v["switch"]["numbers"]).astype(np.float32)  # (L, H, rows, cols)
    layers, n_heads, rows, cols = heads.shape
    codes = wire.SwitchCodes(layers * n_heads, rows, cols)
    assert codes.put(0, heads.reshape(-1, rows, cols))
    zmax, titles, bars, ticks = (
        [x for row in payload[k] for x in row] for k in ("zmax", "titles", "bars", "ticks")
    )
    mine = wire.switch_payload(layers, n_heads, codes, zmax, titles, bars, ticks)
    theirs = {k: x for k, x in payload.items() if k not in ("id", "run")}  # the tab adds those
    assert {**mine, "data": None} == {**theirs, "data": None}
    np.testing.assert_array_equal(inflated(mine["data"]), inflated(payload["data"]))


def test_a_number_without_a_code_is_refused():
    codes = wire.SwitchCodes(1, 1, 2)
    assert not codes.put(0, np.array([[[0.5, 70.0]]], np.float32))
    assert not codes.put(0, np.array([[[-0.1, 0.5]]], np.float32))


def test_the_spec_quotes_the_vector():
    """docs/wire-format.md shows the vector's payloads as they are in the file."""
    text = DOC.read_text(encoding="utf-8")
    v = vector()
    assert v["packed"]["figure"]["layout"]["meta"]["packed"]["data"] in text
    assert v["switch"]["payload"]["data"] in text
    assert "tests/wire_vector.json" in text
