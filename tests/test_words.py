"""One table of our words, ui/zh_CN.json, for the server, the figures and the page (issue 41):
every English text the code asks for has its Chinese there, keeping its fields and markup; no
entry is left that nothing asks for; a page in 简体中文 names every label in Chinese; and no code
below the page keeps Chinese of its own."""

from __future__ import annotations

import ast
import json
import re
import string

import pytest

import app
import lang
import ui.js as ui_js
from tests.conftest import ROOT
from ui import i18n

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")  # Chinese characters (punctuation aside)
# Where the code says its words: the server, the figures, the models' and the checkpoints'
# refusals, the walk's notes, the training lessons.
CODE = [ROOT / "app.py", ROOT / "engine.py", ROOT / "shelf.py", ROOT / "lang.py"]
CODE += [
    p
    for d in ("ui", "viz", "analysis", "model", "serve", "train")
    for p in ROOT.glob(f"{d}/**/*.py")
]
ASKING = ("tr", "Msg", "Note", "t")  # the calls whose first argument is a word of the table
# Patterns of punctuation and fields only: the same in both languages.
AS_IS = {"", " — {notes}", "{first}{more}"}


def trees() -> dict:
    return {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(set(CODE))}


def asked_in_code() -> dict[str, str]:
    """Every literal first argument of tr(…), Msg(…), Note(…) or t(…) in the code, with where
    it is (a module constant given instead, Msg(CANNOT_READ, …), counts as its text), and every
    ta.t('…') of the page's scripts."""
    parsed = trees()
    constants = {  # NAME = "text" at the top of a module
        target.id: node.value.value
        for tree in parsed.values()
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found = {word: "ui/js" for word in ui_js.page_words()}
    for path, tree in parsed.items():
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) in ASKING
                and node.args
            ):
                continue
            first, where = node.args[0], f"{path.relative_to(ROOT)}:{node.lineno}"
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found[first.value] = where
            elif isinstance(first, ast.Name) and first.id in constants:
                found[constants[first.id]] = where
    return found


@pytest.fixture(scope="module")
def demo():
    lang.USED.clear()  # what other modules' tests said (their hostile text too) is not code's
    return app.build_demo()  # lang.USED then also holds the labels the page names through a name


def test_every_word_the_code_asks_for_has_its_chinese(demo):
    asked = asked_in_code()
    assert len(asked) > 500 and "Lecture deck" in asked and "Layer" in asked
    asked |= {word: "said while building the page" for word in lang.USED}
    missing = {
        word: where
        for word, where in asked.items()
        if word not in lang.ZH and word not in AS_IS and re.search("[A-Za-z]", word)
    }
    missing.pop("bertviz", None)  # a name, the same in both languages
    assert not missing, f"add to ui/zh_CN.json: {json.dumps(missing, indent=1)}"


def fields_of(pattern: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(pattern) if name}


def test_every_entry_keeps_its_fields_formulas_and_markup():
    for english, chinese in json.loads(lang.WORDS_FILE.read_text(encoding="utf-8")).items():
        # The same fields (Chinese may leave out one English needs: "3rd" is "3" in Chinese).
        assert fields_of(chinese) <= fields_of(english), (english, chinese)
        assert len(fields_of(english) - fields_of(chinese)) <= 1, (english, chinese)
        plain = chinese.replace("`", "")  # a name marked as code is still the formula's
        for formula in re.findall(r"[A-Za-z_]*[ᵀ√‖Σ±−^][^\s，。；、：（）]*", english):
            assert formula.rstrip(".,;:)") in plain, (formula, chinese)
        for code in re.findall(r"`[^`]+`", english):  # Chinese may mark more names as code
            assert code in chinese, (code, chinese)
        assert chinese.count("**") >= english.count("**"), chinese  # bold kept, or added
        assert english.count("<br>") == chinese.count("<br>"), chinese
        assert english.startswith("#") == chinese.startswith("#"), chinese


def test_the_table_is_sorted_and_each_word_has_one_entry():
    text = lang.WORDS_FILE.read_text(encoding="utf-8")
    pairs = json.loads(text, object_pairs_hook=list)
    english = [en for en, _ in pairs]
    assert english == sorted(set(english)), "keep ui/zh_CN.json sorted, one entry a word"
    assert not (ROOT / "ui" / "zh_CN_server.json").exists()


def test_no_entry_is_unused(demo):
    strings = set(lang.USED)  # also the words the page made while it was built (its model list)
    strings |= {
        node.value
        for tree in trees().values()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    strings |= set(ui_js.page_words())  # the page's scripts' words (ta.t in ui/js/*.js)
    for card in ROOT.glob("assets/trained/*/card.json"):  # a trained model's "source"
        strings.add(json.loads(card.read_text(encoding="utf-8"))["config"]["source"])
    unused = sorted(set(lang.ZH) - strings)
    assert not unused, f"ui/zh_CN.json says words the code no longer says: {unused}"


def markers(value) -> list[str]:
    """The translation keys of every marker in a page's config."""
    if isinstance(value, i18n.I18nData):
        return [value.key]
    if isinstance(value, dict):
        if value.get("__type__") == "translation_metadata":
            return [value["key"]]
        return [k for v in value.values() for k in markers(v)]
    if isinstance(value, list | tuple):
        return [k for v in value for k in markers(v)]
    return []


def test_a_chinese_page_names_every_label_in_chinese(demo):
    """Each label, button, tab name and caption the page's config names by a marker has its
    Chinese in the dictionaries the browser says the page with (the one Chinese copy, "zh"),
    and they hold no word that the files do not: building the page added none."""
    keys = markers(demo.get_config_file())
    assert len(set(keys)) > 80
    words = i18n.page_i18n(demo).translations
    english = [i18n.ENGLISH[k] for k in keys if not CJK.search(words["zh"].get(k, ""))]
    assert not english, f"a Chinese page would show these in English: {english}"
    gradio = {en for en, _ in i18n.SCRIPT_WORDS.values()}
    assert set(words["en"].values()) - gradio <= set(lang.ZH)


def test_the_pages_scripts_get_their_words_from_the_table():
    words = ui_js.page_words()
    assert {"Lecture deck", "layer", "⏳ Opening the linked view…"} <= set(words)
    head = ui_js.HEAD
    assert all(json.dumps(lang.ZH[w], ensure_ascii=False) in head for w in words if w in lang.ZH)
    scripts = sorted((ROOT / "ui" / "js").glob("*.js"))
    inline = [s.name for s in scripts if CJK.search(s.read_text(encoding="utf-8"))]
    assert not inline, f"a script keeps words of its own; use ta.t('…'): {inline}"


def test_code_below_the_page_keeps_no_chinese_and_one_module_reads_our_words():
    files = [*sorted((ROOT / "viz").glob("*.py")), *sorted((ROOT / "analysis").glob("*.py"))]
    assert len(files) > 20
    chinese = [str(f.relative_to(ROOT)) for f in files if CJK.search(f.read_text("utf-8"))]
    assert not chinese, f"move these words into ui/zh_CN.json: {chinese}"
    project = [p for p in ROOT.rglob("*.py") if not {".venv", "tests"} & set(p.parts)]
    readers = {  # who opens a file of words: ours in lang.py, Gradio's own in ui/i18n.py
        (str(path.relative_to(ROOT)), node.value)
        for path in project
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"zh_CN\w*\.json", node.value)
    }
    assert readers == {("lang.py", "zh_CN.json"), ("ui/i18n.py", "zh_CN_gradio.json")}, readers
