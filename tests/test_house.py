"""Issue 27's house items on the page: the score breakdown's query and key sliders end at the
text's last token (as layer and head end at the model's last), and every table shows its own
headers before anything is drawn, never Gradio's "1 | 2 | 3"."""

from __future__ import annotations

import pytest

import app
from engine import Engine
from lang import speaking
from ui.handlers import RUN_INPUTS, Ask
from ui.render import render
from ui.state import Selection, ViewState


@pytest.fixture(scope="module")
def engine():
    return Engine(device="cpu")


def run(peers, text: str, model: str = "bert", **sel) -> dict:
    values = dict(zip(RUN_INPUTS, (text, model, "", "", "", "final", True), strict=True))
    return peers.views.run(Ask(tab="heads", page="house", sel=Selection(**sel)), **values)


def test_the_query_and_key_sliders_end_at_the_texts_last_token(engine):
    peers = app.handlers(engine, ViewState("x", "bert"), {"bert", "dates"})
    out = run(peers, "time flies like an arrow")  # [CLS] + 5 words + [SEP]
    assert out["query"]["maximum"] == 6 and out["key"]["maximum"] == 6
    assert "value" not in out["query"]  # a value the user set is left alone ...
    out = run(peers, "dogs bark", query=600, key=2)
    assert out["query"]["maximum"] == 3 and out["query"]["value"] == 3  # ... unless past the end
    assert "value" not in out["key"]
    # an encoder-decoder: the longest of its stacks (each view clamps to its own)
    out = run(peers, "2026年11月22日", "dates")
    stacks = engine.analyse("2026年11月22日", "dates").trace
    longest = max(len(t) for t in stacks.tokens_for("decoder")[0] + stacks.tokens_for("encoder")[0])
    assert out["query"]["maximum"] == out["key"]["maximum"] == longest - 1
    link = peers.views.deeplink(Ask(page="house-link"), "?text=dogs%20bark&tab=heads&query=9")
    assert link["query"]["maximum"] == 3 and link["query"]["value"] == 3


def test_every_table_has_its_headers_before_it_is_drawn(engine):
    demo = app.build_demo(engine, public=False)
    config = demo.get_config_file()
    props = {c["props"].get("elem_id"): c["props"] for c in config["components"]}
    tables = [e for e, p in props.items() if c_type(config, e) == "dataframe"]
    assert {"head-stats", "ablation-table", "corpus-table", "steps-table"} <= set(tables)
    for elem in tables:
        assert props[elem]["value"]["headers"] != ["1", "2", "3"], elem
    assert props["ablation-table"]["value"]["headers"][:3] == ["kind", "layer", "head"]
    assert props["corpus-table"]["value"]["headers"][2] == "entropy_mean"
    assert props["steps-table"]["value"]["headers"][:2] == ["step", "reads"]
    # the default text, "time flies like an arrow": 7 tokens
    assert props["query"]["maximum"] == props["key"]["maximum"] == 6


def c_type(config: dict, elem: str) -> str:
    return next(c["type"] for c in config["components"] if c["props"].get("elem_id") == elem)


def test_a_model_with_no_output_shows_the_steps_tables_headers_in_the_pages_language(engine):
    bert = engine.analyse("time flies like an arrow", "bert")
    table = render("output", bert, Selection(), only={"steps_table"})["steps_table"]
    assert len(table) == 0 and list(table.columns)[:3] == ["step", "reads", "predicts"]
    with speaking("zh-CN"):
        table = render("output", bert, Selection(), only={"steps_table"})["steps_table"]
    assert "step" not in table.columns and "p" in table.columns


def test_drawing_the_heads_tab_clears_the_ablation_table_to_its_headers(engine):
    """The ablation table is drawn on demand: drawing the tab again clears it (it showed an older
    text) to its own headers in the request's language, not to Gradio's "1 | 2 | 3"."""
    bert = engine.analyse("time flies like an arrow", "bert")
    table = render("heads", bert, Selection())["ablation_table"]
    assert len(table) == 0 and list(table.columns)[:3] == ["kind", "layer", "head"]
    with speaking("zh-CN"):
        table = render("heads", bert, Selection())["ablation_table"]
    assert len(table) == 0 and "kind" not in table.columns and "层" in table.columns
    assert render("heads", bert, Selection())["trace_npz"] is None  # a file: cleared to nothing
