"""A Chinese page says every sentence in Chinese (issue 52): every tab of the page, drawn in
简体中文 through the app's own handlers (a Run, each tab, each tab's on-demand actions and the
corpus), for the bundled BERT, the trained induction and dates models and a decoder preset,
holds no English word but names, ids, formulas and data; and every label and caption the page
names is Chinese (the Model tab's config keeps its code names, each with its meaning in Chinese
beside it). The unknown-token warning: a trained model's output is said to be unreliable
as soon as one of its text's tokens is unknown to it, in both languages."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace

import pandas as pd
import pytest

import app
import lang
from engine import BUNDLED, DEFAULT_SECOND, Engine, model_choices
from lang import speaking
from tests.test_server_language import data_in, english_words
from ui import i18n
from ui.handlers import Ask
from ui.render import render
from ui.state import Selection, ViewState
from ui.tabs import TAB_IDS

# Model, text and the corrupt text of its pair: each trained model's own shipped pair, BERT's
# Winograd pair, a decoder preset's pair of our own (random weights, no pair shipped).
CASES = [
    (
        BUNDLED,
        "The trophy didn't fit in the suitcase because it was too big.",
        "The trophy didn't fit in the suitcase because it was too small.",
    ),
    ("induction", "qzxwv qzxw", "bhmtk qzxw"),
    ("dates", "二〇二六年十一月二十二日", "二〇二六年十一月二十三日"),
    ("seed001-decoder", "我喜欢你", "我喜欢他"),
]
ACTIONS = {
    "heads": ("ablate", "export"),
    "patching": ("patch",),
    "circuits": ("circuit", "compare"),
}
CORPUS = "time flies like an arrow\nfruit flies like a banana"
# Names the Chinese keeps as they are: people cited, model families and checkpoints ("GPT-2
# small"), file kinds, keys, Gradio, and the paper's variable in PE(pos, 2i).
NAMES = set(
    """RoPE LLaMA RMSNorm Qwen Qwen2 Qwen3 Mistral Gemma GPT Nanda Elhage Wang Meng Heimersheim
    Xiao Su Hanna Syed nostalgebraist Pearson Winograd Olsson Abnar Zuidema Kobayashi Clark MDS
    SiLU SwiGLU csv npz txt json safetensors PageDown PageUp Esc rollout arXiv GPT-2 small
    Gradio pos SmolLM SmolLM2 Instruct Apache PyPI llm gguf GGUF""".split()  # noqa: SIM905
)
CONFIG_VALUES = {"post", "pre", "layer", "rms", "ffn", "gated"}  # code values a meaning glosses
MODEL_IDS = [model_id for _, model_id in model_choices()]  # the model list names each by id


def prose(text: str) -> str:
    """``text`` less what stays as it is in any language: a work's title in italics, code names
    with an underscore (d_model, previous_token, α_ij) and a formula's functions and indices
    (norm(h), base^(…), P[pos])."""
    text = re.sub(r"(?<![*\w])\*(?!\*)[^*\n]+?(?<!\*)\*(?!\*)", " ", text)  # *a title*
    text = re.sub(r"\w*_\w+", " ", text)
    text = re.sub(r"[A-Za-z]+(?=[(^])", " ", text)
    return re.sub(r"\[[A-Za-z]+\]", " ", text)


FORMULA_PROSE = re.compile(r"\b[a-z]{2,} [a-z]{2,}\b")  # words, not symbols, inside a formula


def table_texts(value: pd.DataFrame) -> list[str]:
    """A table's headers and the text of its cells (numbers aside)."""
    cells = [str(v) for column in value.columns for v in value[column] if isinstance(v, str)]
    return [*map(str, value.columns), *cells]


def formulas(shown: str) -> list[str]:
    """The Inside-a-layer cards' formulas: symbols only, the words around them said apart."""
    found = re.findall(r'ta-step-formula"><code>(.*?)</code>', shown, flags=re.S)
    return [html.unescape(f) for f in found if FORMULA_PROSE.search(html.unescape(f))]


SHOWN_KEYS = {"text", "hovertemplate", "hovertext", "name", "ticktext", "title", "titles"}
POSITION = re.compile(r"\d+·")
UNSHOWN_KEYS = {"template", "meta", "config"}  # plotly's own, ids and packed numbers


def json_texts(value) -> list[str]:
    """The strings a figure (or the step switch's or head switch's payload) shows a reader: its
    titles, annotations, hover templates, legend names and tick labels."""
    if isinstance(value, list):
        return [t for item in value for t in json_texts(item)]
    if not isinstance(value, dict):
        return []
    found = []
    for key, item in value.items():
        if key in SHOWN_KEYS and isinstance(item, str | list):
            found += [t for t in pd.Series(item).explode().tolist() if isinstance(t, str)]
        elif key not in UNSHOWN_KEYS:
            found += json_texts(item)
    return found


def choice_texts(update: dict) -> list[str]:
    """A gr.update's choices as the page lists them (a page label is the captions' test's)."""
    labels = [c[0] if isinstance(c, list | tuple) else c for c in update.get("choices") or []]
    # a position as the Position box lists it ("9·suitca") is data: its token, cut
    return [label for label in labels if isinstance(label, str) and not POSITION.match(label)]


def texts_of(outputs: dict) -> list[tuple[str, str]]:
    """(output name, a text it shows) for a handler's outputs, as the page shows them."""
    found = []
    for name, value in outputs.items():
        if value is None or name == "bertviz_html" or name.endswith(("_csv", "_npz")):
            continue  # bertviz's own page, downloads
        plot = getattr(value, "plot", None)  # a finished figure (gradio's PlotData)
        if isinstance(plot, str) or name in ("layer_data", "head_data"):
            shown = json_texts(json.loads(plot or value))
        elif hasattr(value, "to_plotly_json"):  # a figure drawn apart (the corpus's map)
            shown = json_texts(value.to_plotly_json())
        elif isinstance(value, pd.DataFrame):
            shown = table_texts(value)
        elif isinstance(value, dict):  # a gr.update
            shown = choice_texts(value)
        else:
            shown = [re.sub(r'title="[^"]*"', "", str(value))]  # chips' tooltips quote tokens
        found += [(name, text) for text in shown]
    return found


@pytest.fixture(scope="module")
def drawn():
    """[(where, text shown, data it may quote)] for every tab and action of CASES, in 简体中文."""
    lang.USED.clear()
    engine = Engine(device="cpu")
    default = ViewState(CASES[0][1], BUNDLED, second=DEFAULT_SECOND)
    peers = app.handlers(engine, default, {model for model, _, _ in CASES})
    views, found = peers.views, []
    with speaking("zh-CN"):
        for model, text, corrupt in CASES:
            ask = Ask(sel=Selection(pair=corrupt), lang="zh-CN", page=f"zh-{model}")
            ran = views.run(ask, text, model, "", "", DEFAULT_SECOND, "", True)
            analysis = engine.analyse(text, model)
            batch = engine.analyse(text, model, second=DEFAULT_SECOND)
            tokens = {t for a in (analysis, batch) for side in a.trace.tokens for t in side}
            tokens |= {t for side in analysis.trace.tgt_tokens or [] for t in side}
            allowed = {text, text[:59], corrupt, model, DEFAULT_SECOND, CORPUS, *tokens}
            allowed |= {t.lstrip("#Ġ▁") for t in tokens}
            config = analysis.trace.config.to_dict()  # the Model tab's code names and values
            allowed |= {*config, *(str(v) for k, v in config.items() if k != "source")}
            allowed |= CONFIG_VALUES  # a field's meaning glosses the values it may take
            shown = texts_of(ran)
            for tab in TAB_IDS:
                on_tab = replace(ask, tab=tab)
                shown += texts_of(views.tab(on_tab, tab))
                for action in ACTIONS.get(tab, ()):
                    shown += texts_of(views.selection(on_tab, action))
            heads = replace(ask, tab="heads")
            shown += texts_of(peers.corpus.run(heads, CORPUS, "", None))
            found += [((model, name), text, allowed) for name, text in shown]
    return found


def test_every_tab_and_action_of_a_chinese_page_speaks_chinese(drawn):
    left, worded = {}, {}
    for where, shown, allowed in drawn:
        if words := english_words(prose(shown), allowed | NAMES):
            left.setdefault(" / ".join(where), set()).update(words)
        if said := formulas(shown):
            worded[" / ".join(where)] = said
    left = {where: " ".join(sorted(words)) for where, words in left.items()}
    assert not left, json.dumps(left, ensure_ascii=False, indent=1)[:8000]
    assert not worded, worded
    chinese = [shown for _, shown, _ in drawn if re.search(r"[\u4e00-\u9fff]", shown)]
    assert len(chinese) > 200  # every tab was drawn, in Chinese


@pytest.fixture(scope="module")
def demo():
    return app.build_demo()


def test_every_label_and_caption_of_a_chinese_page_is_chinese(demo):
    """The page's own words (captions with their formulas, labels, buttons, tab names, the model
    list, tables' headers): every word the page hands the browser to say on a Chinese page."""
    words = i18n.page_i18n(demo).translations
    left = {}
    for key, english in words["en"].items():
        chinese = re.sub(r"\{\w+\}", " ", words["zh"].get(key) or words["zh-CN"].get(key, ""))
        if found := english_words(prose(chinese), NAMES | set(MODEL_IDS)):
            left[english[:60]] = " ".join(sorted(set(found)))
    assert len(words["en"]) > 150
    assert not left, json.dumps(left, ensure_ascii=False, indent=1)


# ---- the unknown-token warning -------------------------------------------------------------
# 4 of its 14 characters (今, 天, 是, 号) are not in the dates model's vocabulary: it decodes a
# wrong date, 2020-12-13, which the page must not show as the model reading 2026-11-22.
DATE = "今天是2026年11月22号"
WARNINGS = {
    "en": ("4 of this text's 14 tokens", "may be wrong"),
    "zh-CN": ("14 个词元中的 4 个", "可能是错的"),
}


@pytest.fixture(scope="module")
def engine():
    return Engine(device="cpu")


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_a_date_with_a_few_unknown_characters_is_warned_about(engine, language):
    """Not most of the text unknown, and still warned: the status line (every tab) and the
    Output tab, beside the decoded date, name the unknown tokens and say the output may be
    wrong, in the page's language; a date the model reads whole gets no such sentence."""
    found = engine.analyse(DATE, "dates")
    [decoded] = [n for n in found.notices if "greedy output" in n]
    assert "2020-12-13" in decoded  # the wrong date the warning is for
    [warning] = [n for n in found.notices if "[UNK]" in n]
    assert data_in(warning) >= {"4", "14"} and "“今”, “天”, “是”, “号”" in warning
    with speaking(language):
        status = app.status_markdown(found, found.notices, None)
        output = render("output", found, Selection())["prediction"]
    for said in (status, output):
        plain = said.replace("\\", "")
        assert all(words in plain for words in WARNINGS[language]), plain
        assert "“今”, “天”, “是”, “号”" in plain and "⚠️" in plain, plain
    if language == "zh-CN":
        with speaking(language):
            assert not english_words(lang.tr(warning), data_in(warning) | {"UNK"})
    whole = engine.analyse("2026年11月22日", "dates")
    assert not [n for n in whole.notices if "[UNK]" in n]


def test_one_unknown_token_warns_a_trained_model_and_not_an_untrained_one(engine):
    """The induction model reads letters, digits and space: one comma is warned about, as it
    decides what the model copies; a preset of random weights judges nothing."""
    copied = engine.analyse("hello, hello", "induction")
    assert any("1 of this text's 12 tokens" in n and "“,”" in n for n in copied.notices)
    preset = engine.analyse("hello, hello😀", "seed001-decoder")
    assert not [n for n in preset.notices if "[UNK]" in n]


def test_a_measured_pair_with_an_unknown_token_says_the_measure_may_be_wrong():
    from ui.patching_inputs import unknown_note

    loaded = Engine(device="cpu").model("induction")
    note = unknown_note(loaded, "qzxwv qzxw", "qzxwv qzx!")
    assert "“!”" in note and "may be wrong" in note
    with speaking("zh-CN"):
        assert "可能是错的" in lang.tr(note)


def test_the_pattern_box_reads_the_names_its_chinese_label_gives():
    """A Chinese page asks for 首词元、自身、同一个词、前一个或后一个: each is read as the
    pattern it names (and the English names still work there)."""
    import analysis
    from ui.tabs.heads import PATTERN_NAMES, pattern_name

    with speaking("zh-CN"):
        chinese = [lang.tr(name) for name in PATTERN_NAMES]
        label = lang.tr("Your own pattern column: first, self, same word, previous or next")
    assert all(name in label for name in chinese) and not english_words(label, set())
    assert [pattern_name(f" {name} ") for name in chinese] == list(PATTERN_NAMES)
    tokens = ["a", "b", "a"]
    for name, english in zip(chinese, PATTERN_NAMES, strict=True):
        said = analysis.pattern_mask(tokens, pattern_name(name))
        assert said.equal(analysis.pattern_mask(tokens, english)), name
    assert pattern_name("previous") == "previous"
