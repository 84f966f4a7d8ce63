"""What the server writes, in 简体中文 (issue 9): every tab's figures (titles, axis titles, colour
bars, panel titles, hover text), table headers, markdown and the status line, drawn under
lang.speaking("zh-CN"), hold no English sentence; what they said has its Chinese; English stays
English; the head switch's titles follow the language."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import app
import lang
from engine import BUNDLED, Engine
from lang import Msg, message_of, speaking, tr
from ui import state as views
from ui.render import failed_view, render
from ui.tabs import TAB_IDS
from viz import attention

ROOT = Path(__file__).resolve().parents[1]
TEXT = "time flies like an arrow"
TABLE = json.loads(lang.WORDS_FILE.read_text(encoding="utf-8"))  # as written: bold as **
# Words that are names or symbols in both languages: formulas, model and library names, units.
SYMBOLS = set(
    """softmax inf LayerNorm QK QKᵀ d_k d_model d_head d_ff PE BERT CLS SEP PAD UNK CPU CUDA GPU ms
    id ids sin cos LM FFN GELU ReLU erf tanh E_tok E_type tok type max_len bertviz head_mask
    W_O W_Q W_K W_vocab b_O v_key context_h exp Kobayashi Abnar Zuidema Clark et al nats
    all MiniLM L6 v2 seed pooler ISO Hub Hugging Face TransformerConfig AdamW KL ablated
    input_ids tgt_ids token_type dates induction roles T_tgt Transformer Sublayer
    lm_head Linear conv TransformerEncoder Jensen Shannon Olsson TransformerLens logit
    lens""".split()  # noqa: SIM905 - words read better as words
)


def english_words(text: str, allowed: set[str]) -> list[str]:
    """The English words left in ``text`` once markup, placeholders and names are taken out."""
    text = re.sub(r"<style>.*?</style>", " ", str(text), flags=re.S)
    text = re.sub(r"<code>.*?</code>", " ", text, flags=re.S)  # code and formulas, as in `…`
    text = re.sub(r"<[^>]*>|&#?\w+;|%\{[^}]*\}|`[^`]*`|\]\([^)]*\)", " ", text)
    names = {w for name in allowed for w in re.findall(r"[A-Za-z][A-Za-z_]*", name)}
    words = re.findall(r"[A-Za-z][A-Za-z_]*", text)
    # Single letters are variables (B, T, L, h, i, j, t, x, A − B); names and symbols pass.
    return [w for w in words if len(w) > 1 and w not in SYMBOLS | names and not w.isupper()]


def figure_texts(fig) -> list[str]:
    """Every text a reader of the figure sees: title, axis and colour-bar titles, annotations
    (panel titles), hover templates and legend names."""
    layout = fig.layout
    texts = [layout.title.text or ""]
    for name in layout:
        if name.startswith(("xaxis", "yaxis")):
            texts.append(layout[name].title.text or "")
        if name.startswith("coloraxis"):
            texts.append(layout[name].colorbar.title.text or "")
    texts += [a.text or "" for a in layout.annotations]
    for trace in fig.data:
        texts.append(getattr(trace, "hovertemplate", None) or "")
        colorbar = getattr(trace, "colorbar", None)
        if colorbar is not None:
            texts.append(colorbar.title.text or "")
    return texts


def output_texts(name: str, value) -> list[str]:
    if (
        value is None or name == "bertviz_html" or name.endswith(("_csv", "_npz"))
    ):  # bertviz's own page (our note: tested below)
        return []
    if name == "head_data":  # the head switch's titles
        return [t for row in json.loads(value)["titles"] for t in row] if value else []
    if name == "layer_data":  # the step switch's figures: titles, axis titles, hover
        texts = []
        for fig in value.figures if value else []:  # ui.tabs.layer.StepFigures: plain JSON
            layout = fig["layout"]
            texts.append(layout["title"]["text"])
            texts += [layout[a].get("title", {}).get("text", "") for a in ("xaxis", "yaxis")]
            texts += [trace.get("hovertemplate", "") for trace in fig["data"]]
        return texts
    if hasattr(value, "layout"):
        return figure_texts(value)
    if isinstance(value, pd.DataFrame):
        return [str(c) for c in value.columns]
    if isinstance(value, dict):  # a gr.update
        return []
    return [re.sub(r'title="[^"]*"', "", str(value))]  # chips' tooltips quote each token


CASES = [  # model, text, target, selection: every family, both scales, norms, trained heads
    (BUNDLED, TEXT, None, {}),
    (BUNDLED, TEXT, None, {"scale": "head", "measure": "norms"}),
    ("seed001-decoder", "我喜欢你", None, {"stack": "decoder"}),
    ("seed003-encdec", "我喜欢你", "I love you", {"stack": "cross"}),
    ("seed004-encoder", "我喜欢你", None, {}),
    ("dates", "2026年11月22日", None, {"stack": "cross"}),
    ("roles", "我喜欢你", None, {}),
    ("induction", "qzvkdmqzv", None, {"stack": "decoder"}),
]


@pytest.fixture(scope="module")
def drawn_in_chinese():
    """[(where, text)] of everything the server draws for CASES, in 简体中文."""
    lang.USED.clear()  # what other modules' tests said (their hostile text too) is not code's
    engine = Engine(device="cpu")
    found = []
    with speaking("zh-CN"):
        for model, text, target, fields in CASES:
            analysis = engine.analyse(text, model, target)
            batch = engine.analyse(text, model, target, second="I have a dog.")
            sel = views.Selection(**fields)
            tokens = [
                t for side in (batch.trace.tokens, batch.trace.tgt_tokens or []) for t in side
            ]
            tokens = [token for side in tokens for token in side]
            allowed = {text, model, *(target or "").split(), *tokens}
            allowed |= {t.lstrip("#") for t in tokens} | {"I have a dog."}
            for tab in TAB_IDS:
                outputs = render(tab, analysis, sel, batch)
                if tab == "heads":  # the on-demand table too
                    outputs |= render(tab, analysis, sel, batch, only={"ablation_table"})
                for name, value in outputs.items():
                    for shown in output_texts(name, value):
                        found.append(((model, tab, name), shown, allowed))
            status = app.status_markdown(analysis, [], "?text=x")
            found.append(((model, "status", ""), status, allowed | {analysis.model.model_id}))
    return found


def test_every_view_and_the_status_line_speak_chinese(drawn_in_chinese):
    left = {}
    for where, shown, allowed in drawn_in_chinese:
        words = english_words(shown, allowed)
        if words:
            left[" / ".join(where)] = " ".join(sorted(set(words)))
    assert not left, json.dumps(left, ensure_ascii=False, indent=1)[:6000]
    chinese = [shown for _, shown, _ in drawn_in_chinese if re.search(r"[\u4e00-\u9fff]", shown)]
    assert len(chinese) > 100  # the views really were drawn, in Chinese


def test_notices_and_errors_made_earlier_are_said_in_the_readers_language():
    _, notices = app.capped("x" * 30_000, "Text")
    assert notices[0].startswith("Text is 30,000 characters")  # English, as before
    with speaking("zh-CN"):
        said = app.status_markdown(None, notices, None)
        error = app.sentence(app.InputError(Msg("Model must be one of the listed model names.")))
    assert "30,000" in said and "20,000" in said and re.search(r"[\u4e00-\u9fff]", said)
    assert not english_words(said, set()) and not english_words(error, set())
    assert app.sentence(app.InputError(Msg("Model must be one of the listed model names."))) == (
        "Model must be one of the listed model names."
    )


def test_everything_the_views_said_has_its_chinese(drawn_in_chinese):
    """What was said while drawing, through a name too (STACK_TITLES[stack]), which no scan of
    the code's literals finds (tests/test_words.py scans those)."""
    said_as_is = {"", " — {notes}", "{first}{more}"}  # punctuation and fields only
    missing = sorted(p for p in lang.USED - set(lang.ZH) - said_as_is if re.search("[A-Za-z]", p))
    assert not missing, f"add to ui/zh_CN.json: {missing}"


def test_english_is_the_default_and_the_language_is_reset_after_a_request():
    assert tr(
        "Layer {layer}, head {head} — {stack}{note}", layer=1, head=2, stack="x", note=""
    ) == ("Layer 1, head 2 — x")
    with speaking("zh-CN"):
        assert tr("query") != "query"
        with speaking("en"):
            assert tr("query") == "query"
        assert lang.LOCALE.get() == "zh-CN"
    assert lang.LOCALE.get() == "en" and tr("query") == "query"
    assert lang.locale_of("zh-TW") == "zh-CN" and lang.locale_of(None) == "en"


def test_the_head_switch_titles_follow_the_language(bert):
    net, tok = bert
    enc = tok(["time flies like an arrow"], return_tensors="pt")
    trace = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    with speaking("zh-CN"):
        data = attention.head_switch_data(trace, "encoder", scale="head")
        title = attention.head_figure(trace, "encoder", 2, 5, scale="head").layout.title.text
    assert data["titles"][2][5] == title
    assert re.search(r"[\u4e00-\u9fff]", title) and "2" in title and "5" in title
    english = attention.head_figure(trace, "encoder", 2, 5, scale="head").layout.title.text
    assert english.startswith("Layer 2, head 5 — encoder self-attention")


def test_the_head_statistics_caption_names_the_columns_as_the_table_heads_them():
    """The caption over the Heads table names each statistic in bold with the very word its
    column header shows: "**prev**ious" in English, "**前一个**" in 简体中文."""
    from analysis.head_stats import COLUMNS
    from ui.tabs.heads import STATS_CAPTION, shown_columns

    for language, caption in (("en", STATS_CAPTION), ("zh-CN", TABLE[STATS_CAPTION])):
        with speaking(language):
            headers = list(shown_columns(pd.DataFrame(columns=list(COLUMNS))).columns)
        named = [header for header in headers[2:] if f"**{header}**" in caption]  # not layer, head
        assert named == headers[2:], (language, headers, caption)


def test_the_ablation_caption_names_what_the_table_and_the_switch_show():
    """The caption over the ablation table names, in bold, each effect column as its header
    says it, the two summary rows as the table labels them and the two modes as the switch
    does, in both languages."""
    from analysis.ablation import EFFECTS
    from ui.tabs.heads import ABLATION_CAPTION, shown_columns

    for language, caption in (("en", ABLATION_CAPTION), ("zh-CN", TABLE[ABLATION_CAPTION])):
        with speaking(language):
            headers = list(shown_columns(pd.DataFrame(columns=list(EFFECTS))).columns)
            rows = [tr("set"), tr("sum of singles")]
        modes = ["zero", "mean"] if language == "en" else [TABLE[m] for m in ("zero", "mean")]
        missing = [w for w in headers + rows + modes if f"**{w}**" not in caption]
        assert not missing, (language, missing, caption)


# Names inside refusals that stay as they are in Chinese: dtypes, a config key, a key prefix.
CHECKPOINT_NAMES = {"float32", "float16", "bfloat16", "float64", "vocab_size", "bert", "large"}
LIGHT_REFUSALS = [  # each refused in milliseconds, before any tensor is read
    "3.3B parameters", "layers as text", "config.json 2 MB", "JSON nested 200k deep",
    "header 50 MB", "header past the end", "5k empty tensors", "float8 weights",
    "shape disagrees", "unknown key", "missing key", "key twice", "vocab.txt past the table",
    "added token past the table", "config.json -> /dev/zero", "link to nowhere", "~nosuchuser",
    "/proc/self/root",
]  # fmt: skip


def data_in(message: Msg) -> set[str]:
    """The values a message quotes (names, keys, sizes), in its nested messages too."""
    found = set()
    for value in message.fields.values():
        found |= data_in(value) if isinstance(value, Msg) else {str(value)}
    return found


def test_a_refused_checkpoint_is_said_in_the_readers_language(tmp_path):
    """Loading a custom checkpoint fails with one sentence (a lang.Msg): English as before, and
    wholly Chinese for a Chinese page; only the names it quotes stay as they are."""
    from model import CheckpointError, load_bert
    from tests.test_checkpoint_guard import REFUSALS

    for case in LIGHT_REFUSALS:
        build, fragment = REFUSALS[case]
        with pytest.raises(CheckpointError) as exc:
            load_bert(build(tmp_path / case.replace("/", "_") / "ckpt"), device="cpu")
        message = exc.value.args[0]
        assert isinstance(message, Msg) and fragment in message, (case, message)
        assert tr(message) == str(exc.value)  # English stays what it was
        with speaking("zh-CN"):
            said = tr(message)
        assert re.search(r"[\u4e00-\u9fff]", said), (case, said)
        left = english_words(said, data_in(message) | CHECKPOINT_NAMES)
        assert not left, (case, said, left)


def test_the_app_says_a_checkpoint_refusal_and_a_failed_view_in_the_page_language(tmp_path):
    """The status line of a refused checkpoint, and a view that failed with one of our own
    errors, are Chinese on a Chinese page ("This view could not be drawn (…: <our sentence>)")."""
    from engine import CUSTOM_PREFIX
    from tests.test_checkpoint_guard import with_config

    source = with_config(model_type="t5")(tmp_path / "ckpt")
    with pytest.raises(app.InputError) as exc:
        Engine(device="cpu").analyse("hi", CUSTOM_PREFIX + source)
    english = app.sentence(exc.value)
    assert english == (
        "ckpt is a t5 checkpoint; the app opens BERT, GPT-2, LLaMA, Qwen2 and Mistral "
        "checkpoints (model_type 'bert', 'gpt2', 'llama', 'qwen2' or 'mistral')."
    )
    with speaking("zh-CN"):
        said = app.sentence(exc.value)
        failed = failed_view("breakdown", exc.value)
    names = {"t5", "ckpt", "model_type", "bert", "gpt2", "llama", "qwen2", "mistral"}
    names |= {"BERT", "GPT", "LLaMA", "Qwen2", "Mistral"}
    assert "t5" in said and not english_words(said, names)
    assert "InputError" in failed and said.rstrip("。") in html.unescape(failed), failed
    assert not english_words(failed, names | {"InputError"})


def test_a_refused_language_model_is_said_in_the_page_language(tmp_path):
    """A GPT-2 or LLaMA checkpoint the loader refuses gets the status line's sentence in
    Chinese on a Chinese page, as a refused BERT does."""
    from engine import CUSTOM_PREFIX
    from tests.test_lm import save_checkpoint

    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    save_checkpoint(folder, "llama")
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 5e5}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(app.InputError) as exc:
        Engine(device="cpu").analyse("hi", CUSTOM_PREFIX + str(folder))
    english = app.sentence(exc.value)
    assert english.startswith("tiny-llama scales its rotary positions ('yarn')"), english
    with speaking("zh-CN"):
        said = app.sentence(exc.value)
    assert "tiny-llama" in said and re.search(r"[\u4e00-\u9fff]", said), said
    names = {"tiny", "llama", "yarn", "RoPE", "LLaMA", "rope_type", "default", "llama3"}
    assert not english_words(said, names), said


@pytest.mark.parametrize(
    "bad",
    [
        {"arch": "rnn"},
        {"n_layers": 0},
        {"d_model": 100, "n_heads": 12},
        {"norm": "middle"},
        {"activation": "tanh"},
        {"positions": "alibi"},  # rotary is valid since issue 28
        {"d_model": 9, "n_heads": 3, "positions": "sinusoidal"},  # sin and cos come in pairs
        {"type_vocab_size": -1},
        {"dropout": 1.0},
        {"layer_norm_eps": 0.0},
        {"final_norm": "yes"},
        {"token_labels": ("O", "O")},
        {"pad_id": -1},
    ],
)
def test_a_config_refusal_is_said_in_the_readers_language(bad):
    """A model configuration the code refuses (a custom checkpoint's, or a preset edited in
    Python) says why in one sentence: English as before, Chinese on a Chinese page, where only
    the names and values it quotes stay as they are."""
    from model import PRESETS

    with pytest.raises(ValueError) as exc:
        replace(PRESETS["seed004-encoder"], **bad)
    message = exc.value.args[0]
    assert isinstance(message, Msg) and str(exc.value) == tr(message)
    with speaking("zh-CN"):
        said = message_of(exc.value)
    assert re.search(r"[\u4e00-\u9fff]", said), said
    names = {*bad, "d_model", "n_heads", "sin", "cos", "True", "False", "None", "positions"}
    assert not english_words(said, data_in(message) | names), said
