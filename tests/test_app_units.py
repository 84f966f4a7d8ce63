"""Small pieces of the app: public mode, deep-link parsing, selections, dimension parsing."""

from __future__ import annotations

from urllib.parse import parse_qs

import pytest

import app
import views
from engine import BUNDLED, Engine


@pytest.mark.parametrize(
    "env, flag, expected",
    [
        ({}, None, False),
        ({"SPACE_ID": "user/space"}, None, True),  # on by default on Hugging Face Spaces
        ({"SPACE_ID": "user/space", "TA_PUBLIC": "0"}, None, False),  # switchable by variable
        ({"TA_PUBLIC": "1"}, None, True),
        ({}, True, True),  # and by the --public flag
    ],
)
def test_public_mode_defaults(monkeypatch, env, flag, expected):
    for name in ("SPACE_ID", "TA_PUBLIC"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert app.is_public(flag) is expected


def test_share_link_round_trips_the_selection():
    sel = views.Selection(stack="cross", layer=3, head=7)
    link = app.share_link("我喜欢你 & more", "seed003-encdec", "attention", sel)
    query = parse_qs(link.removeprefix("?"))
    assert query["text"] == ["我喜欢你 & more"] and query["model"] == ["seed003-encdec"]
    assert query["tab"] == ["attention"] and query["layer"] == ["3"] and query["head"] == ["7"]
    assert query["stack"] == ["cross"]


def test_selection_is_clamped_to_the_model():
    analysis = Engine(device="cpu").analyse("hello", "seed002-encoder")
    sel = views.Selection(stack="cross", layer=99, head=-4, layer_b=7, head_b=100).clamp(analysis)
    assert (sel.stack, sel.layer, sel.head, sel.layer_b, sel.head_b) == ("encoder", 1, 0, 1, 7)


def test_dimension_text_is_parsed_with_a_note():
    assert views.parse_dims("0, 1, 2, 3", 64) == ((0, 1, 2, 3), None)
    dims, note = views.parse_dims("5 70 2", 64)
    assert dims == (5, 2) and "above 63" in note
    dims, note = views.parse_dims("none", 64)
    assert dims == (0, 1, 2, 3) and "numbers" in note


def test_masks_view_steps_through_the_padded_text():
    eng = Engine(device="cpu")
    batch = eng.analyse("a much longer first sentence here", BUNDLED, second="short")
    assert views.padded_item(batch.trace, "encoder") == 1
    single = eng.analyse("just one", BUNDLED)
    assert views.padded_item(single.trace, "encoder") == 0


def test_every_tab_renders_for_every_family():
    eng = Engine(device="cpu")
    for model_id in (BUNDLED, "seed001-decoder", "seed003-encdec", "seed004-encoder"):
        analysis = eng.analyse("我喜欢你 too", model_id)
        batch = eng.analyse("我喜欢你 too", model_id, second="I have a dog.")
        for stack in analysis.trace.stacks:
            for tab in views.TABS:
                out = views.render(tab, analysis, views.Selection(stack=stack), batch)
                assert set(out) == set(views.OUTPUTS[tab])
                for name, value in out.items():
                    text = value.to_json() if hasattr(value, "to_json") else str(value)
                    assert "could not be drawn" not in text, (model_id, stack, tab, name)
