"""One table of words per language (issue 35): the server (lang.tr) and the page's scripts
(ta.t in ui/js/*.js) read the same one, ui/zh_CN_server.json; the figures and numbers below the
page keep no Chinese of their own and no second way to say a word (the layer walk's say(en, zh))."""

from __future__ import annotations

import ast
import re

import lang
import ui.js as ui_js
from tests.conftest import ROOT

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")  # Chinese characters (punctuation aside)


def test_viz_and_analysis_hold_no_chinese_and_no_say():
    files = [*sorted((ROOT / "viz").glob("*.py")), *sorted((ROOT / "analysis").glob("*.py"))]
    assert len(files) > 20
    chinese = [str(f.relative_to(ROOT)) for f in files if CJK.search(f.read_text("utf-8"))]
    assert not chinese, f"move these words into ui/zh_CN_server.json: {chinese}"
    project = [p for p in ROOT.rglob("*.py") if not {".venv", "tests"} & set(p.parts)]
    says = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in project
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef) and node.name == "say"
    ]
    assert not says, says


def test_the_pages_scripts_read_the_servers_table():
    words = ui_js.page_words()
    assert {"Lecture deck", "layer", "⏳ Opening the linked view…"} <= set(words)
    missing = [w for w in words if w not in lang.ZH]
    assert not missing, f"add to ui/zh_CN_server.json: {missing}"
    assert ui_js.WORDS["zh-CN"] == {w: lang.ZH[w] for w in words}
    assert "window.ta.WORDS = " in ui_js.HEAD and "讲课幻灯片" in ui_js.HEAD
    scripts = sorted((ROOT / "ui" / "js").glob("*.js"))
    inline = [s.name for s in scripts if CJK.search(s.read_text(encoding="utf-8"))]
    assert not inline, f"a script keeps words of its own; use ta.t('…'): {inline}"
