"""Small pieces of the app: public mode, deep links, selections, dimension parsing, tab registry."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

import pytest

import app
from engine import BUNDLED, Engine
from ui import state as views
from ui.render import render
from ui.tabs import BY_ID, TAB_IDS, TABS
from ui.tabs.embeddings import parse_dims
from ui.tabs.masks import padded_item


@pytest.mark.parametrize(
    "env, flag, expected",
    [
        ({}, None, False),
        ({"SPACE_ID": "user/space"}, None, True),  # on by default on Hugging Face Spaces
        ({"SPACE_ID": "user/space", "TA_PUBLIC": "0"}, None, False),  # switchable by variable
        ({"TA_PUBLIC": "1"}, None, True),
        ({}, True, True),  # and by the --public flag
        ({"TA_PUBLIC": "Y"}, None, True),  # values it does not know fail closed
        ({"TA_PUBLIC": "enabled"}, None, True),
        ({"TA_PUBLIC": "2"}, None, True),
        ({"TA_PUBLIC": "off"}, None, False),
    ],
)
def test_public_mode_defaults(monkeypatch, env, flag, expected):
    for name in ("SPACE_ID", "TA_PUBLIC"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert app.is_public(flag) is expected


def test_share_link_round_trips_the_whole_view():
    sel = views.Selection(
        stack="cross", layer=3, head=7, layer_b=1, head_b=2, dims="4, 5", bertviz_view="model"
    )
    state = views.ViewState(
        "我喜欢你 & more", "seed003-encdec", "I love you", "a b", "attention", sel
    )
    link = views.share_link(state)
    query = parse_qs(link.removeprefix("?"))
    assert query["text"] == ["我喜欢你 & more"] and query["model"] == ["seed003-encdec"]
    assert query["tab"] == ["attention"] and query["layer"] == ["3"] and query["head"] == ["7"]
    assert query["stack"] == ["cross"] and query["target"] == ["I love you"]
    default = views.ViewState("x", "bert")
    back, invalid = views.parse_link(link, {"bert", "seed003-encdec"}, TAB_IDS, default)
    assert invalid == []
    assert back == state


def test_bad_link_parameters_are_named_not_dropped_silently():
    default = views.ViewState("x", "bert")
    query = "?model=gpt9&tab=nowhere&layer=two&head=-1&stack=sideways&bertviz_view=x&colour=red"
    state, invalid = views.parse_link(query, {"bert"}, TAB_IDS, default)
    assert state.model == "bert" and state.tab == "tokens" and state.sel.layer == 0
    text = " ".join(invalid)
    for name in ("model=", "tab=", "layer=", "head=", "stack=", "bertviz_view=", "'colour'"):
        assert name in text, name


def test_selection_is_clamped_to_the_model():
    analysis = Engine(device="cpu").analyse("hello", "seed002-encoder")
    sel = views.Selection(stack="cross", layer=99, head=-4, layer_b=7, head_b=100).clamp(analysis)
    assert (sel.stack, sel.layer, sel.head, sel.layer_b, sel.head_b) == ("encoder", 1, 0, 1, 7)


def test_dimension_text_is_parsed_with_a_note():
    assert parse_dims("0, 1, 2, 3", 64) == ((0, 1, 2, 3), None)
    dims, note = parse_dims("5 70 2", 64)
    assert dims == (5, 2) and "above 63" in note
    dims, note = parse_dims("none", 64)
    assert dims == (0, 1, 2, 3) and "numbers" in note
    dims, note = parse_dims("9" * 5000, 64)  # thousands of digits: a note, not a crash
    assert dims == (0, 1, 2, 3) and note


def test_masks_view_steps_through_the_padded_text():
    eng = Engine(device="cpu")
    batch = eng.analyse("a much longer first sentence here", BUNDLED, second="short")
    assert padded_item(batch.trace, "encoder") == 1
    single = eng.analyse("just one", BUNDLED)
    assert padded_item(single.trace, "encoder") == 0


def test_every_tab_renders_for_every_family():
    eng = Engine(device="cpu")
    models = (BUNDLED, "seed001-decoder", "seed003-encdec", "seed004-encoder", "dates", "roles")
    for model_id in (*models, "induction"):
        analysis = eng.analyse("我喜欢你 too", model_id)
        batch = eng.analyse("我喜欢你 too", model_id, second="I have a dog.")
        for stack in analysis.trace.stacks:
            for tab in TAB_IDS:
                for measure in ("weights", "norms") if tab == "attention" else ("weights",):
                    sel = views.Selection(stack=stack, measure=measure)
                    out = render(tab, analysis, sel, batch)
                    assert set(out) == set(BY_ID[tab].outputs)
                    for name in BY_ID[tab].lazy:  # cleared: to a table's headers, or nothing
                        empty = BY_ID[tab].cleared.get(name)
                        if empty is None:
                            assert out[name] is None, name
                        elif hasattr(out[name], "columns"):
                            assert len(out[name]) == 0, name
                        else:  # left as it is (a control the user set: gr.skip())
                            assert out[name] == empty(), name
                    for name, value in out.items():
                        text = value.to_json() if hasattr(value, "to_json") else str(value)
                        assert "could not be drawn" not in text, (model_id, stack, tab, name, text)


def test_a_selection_change_redraws_only_what_reads_it():
    assert BY_ID["attention"].redrawn_by("head_b") == {"compare_plot"}
    assert BY_ID["attention"].redrawn_by("head") == {"head_plot"}
    assert BY_ID["tokens"].redrawn_by("head") == set()
    assert BY_ID["masks"].redrawn_by("layer") == {"score_steps_plot"}


def test_encoder_decoder_causal_mask_is_drawn_over_the_target():
    eng = Engine(device="cpu")
    analysis = eng.analyse("我喜欢你", "seed003-encdec", target="I love you")
    batch = eng.analyse("我喜欢你", "seed003-encdec", target="I love you", second="hi")
    out = render("masks", analysis, views.Selection(), batch)
    labels = " ".join(out["causal_mask_plot"].data[0].x)
    assert "love" not in labels  # one label per token
    assert "l" in labels and "我" not in labels


def test_nan_and_huge_slider_values_are_clamped():
    analysis = Engine(device="cpu").analyse("hello", "seed002-encoder")
    sel = views.Selection(layer=float("nan"), head=1e300, layer_a=None).clamp(analysis)
    assert (sel.layer, sel.head, sel.layer_a) == (0, 7, 0)


def test_string_inputs_are_capped_before_anything_stores_them():
    text, notices = app.capped("x" * 100_000, "Text")
    assert len(text) == app.MAX_CHARS
    assert notices == [
        "Text is 100,000 characters; only the first 20,000 were read (no model here reads "
        "more than 512 tokens)."
    ]
    assert app.capped(None, "Text") == ("", [])
    with pytest.raises(app.InputError, match="must be text"):
        app.capped(["a", "list"], "Text")


def test_any_exception_becomes_one_sentence():
    message = app.sentence(RuntimeError("shape mismatch\nTraceback (most recent call last): ..."))
    assert message.startswith("This input could not be analysed (RuntimeError: shape mismatch)")
    assert "Traceback" not in message and "\n" not in message


def test_every_event_that_can_run_a_forward_pass_shares_one_bound():
    """Run, Enter, examples, deep links, tabs, controls, picks: one group, one limit (issue 10)."""
    demo = app.build_demo()
    python_events = [fn for fn in demo.fns.values() if fn.fn is not None]
    light = {"on_model_pick", "offer_positions", "load_example"}  # inputs shown or filled in
    alone = {f"select_{action}": action for tab in TABS for action in tab.own_queue}
    assert alone == {
        "select_patch": "patch",
        "select_compare": "compare",
        "select_circuit": "circuit",
    }
    for fn in python_events:
        name = getattr(fn.fn, "__name__", "")
        if name in light or fn.name in light:
            continue
        if name in alone:  # seconds of passes (Patch, circuits): one queue, one at a time
            assert (fn.concurrency_id, fn.concurrency_limit) == ("alone-patch", 1)
            continue
        assert fn.concurrency_id == "model", (fn.name, fn.concurrency_id)
        assert fn.concurrency_limit == app.BOUND["concurrency_limit"], fn.name
        assert fn.queue is not False, fn.name
    assert len(python_events) > 20
    assert demo._queue.default_concurrency_limit == app.BOUND["concurrency_limit"]
    assert demo.api_open is False  # no POST /gradio_api/run/<name> around the queue


def test_the_default_masks_batch_is_visibly_padded():
    from engine import DEFAULT_SECOND

    eng = Engine(device="cpu")
    for model_id in (BUNDLED, "seed002-encoder", "roles"):
        batch = eng.analyse(app.DEFAULT_TEXT, model_id, second=DEFAULT_SECOND)
        lengths = batch.trace.attention_mask.sum(dim=1).tolist()
        assert lengths[1] < lengths[0], (model_id, lengths)


def test_a_chosen_set_of_heads_is_ablated_singly_and_together():
    from ui.tabs.heads import chosen_heads

    analysis = Engine(device="cpu").analyse("dogs bark at night", BUNDLED)
    sel = views.Selection(layer=3, heads_set="0:2, 5:11")
    table = render("heads", analysis, sel, only={"ablation_table"})["ablation_table"]
    assert list(table["kind"]) == ["single", "single", "set", "sum of singles"]
    assert [
        (int(a), int(b)) for a, b in zip(table["layer"][:2], table["head"][:2], strict=True)
    ] == [
        (0, 2),
        (5, 11),
    ]
    assert len(chosen_heads("", 3, 6, 12)) == 12  # empty: the chosen layer's heads
    for wrong in ("7:0", "0:12", "two", "0:1 and more"):
        with pytest.raises(ValueError):
            chosen_heads(wrong, 0, 6, 12)


def test_only_a_page_that_holds_the_head_data_gets_figures_without_numbers():
    """The head and compare figures go without z only to a page that said it can fill them and
    holds (or receives with them) the head switch data; API clients always get complete ones."""
    from serve.turns import page_id
    from ui.state import API, Client

    eng = Engine(device="cpu")
    analysis = eng.analyse("the cat sat on the mat", BUNDLED)
    sel = views.Selection(layer_a=1, head_a=2)
    slim = ("head_plot", "compare_plot")
    assert Client.of("") == Client.of(None) == Client.of("9f1c") == API  # gradio_client, no fill
    api = render("attention", analysis, sel)
    assert all(t.z is not None for name in slim for t in api[name].data)
    data_id = json.loads(api["head_data"])["id"]
    fresh = Client.of("9f1c|fill:")  # can fill, holds no data yet
    assert page_id("9f1c|fill:") == "9f1c"
    out = render("attention", analysis, sel, client=fresh)  # the data comes with the figures
    for name in slim:
        assert all(t.z is None for t in out[name].data)
        assert out[name].layout.meta["fill"]["data"] == data_id
    # ... and the overview and attention block with their own numbers packed (fill.js unpacks)
    for name in ("overview_plot", "block_plot"):
        assert "packed" in out[name].layout.meta
        assert all(t.z is None for t in out[name].data)
        assert "packed" not in (api[name].layout.meta or {})
        assert all(t.z is not None for t in api[name].data)
    only = {"compare_plot"}  # an A/B slider: the data does not come with it
    redrawn = render("attention", analysis, sel, only=only, client=fresh)
    assert redrawn["compare_plot"].data[0].z is not None
    held = Client.of(f"9f1c|fill:{data_id}")
    redrawn = render("attention", analysis, sel, only=only, client=held)
    assert redrawn["compare_plot"].data[0].z is None
    other = Client.of("9f1c|fill:0123456789ab")  # another run's data
    redrawn = render("attention", analysis, sel, only=only, client=other)
    assert redrawn["compare_plot"].data[0].z is not None


def test_each_tab_declares_its_own_selection_fields_and_the_selection_is_made_of_them(
    monkeypatch,
):
    """The stack, layer and head are every view's; any other field belongs to the one tab that
    shows its control (its Tab's ``fields``); the selection is made of them, in that order."""
    from dataclasses import replace as replaced

    import gradio as gr

    from ui.fields import Text, declared

    own = {name: tab.id for tab in TABS for name in tab.fields}
    assert (*views.SHARED, *own) == views.SELECTION_FIELDS
    for tab in (t for t in TABS if t.fields):  # a tab declares the fields its controls set
        with gr.Blocks():
            assert set(tab.fields) == set(tab.build().controls) & set(views.SELECTION_FIELDS)
    assert own["dims"] == "embeddings" and own["keep"] == "circuits" and own["step"] == "layer"
    assert views.Selection(dims="7").dims == "7" and views.Selection().bertviz_view == "head"
    assert views.RULES["keep"].most == 10_000 and views.RULES["pair"].linked == 2_000
    # a second tab declaring a name already declared is refused as the server starts
    second = replaced(TABS[1], fields={**TABS[1].fields, "dims": declared("", Text(9))})
    monkeypatch.setattr(views, "TABS", [TABS[0], TABS[1], second])
    with pytest.raises(TypeError, match="declares dims"):
        views._selection_fields()
