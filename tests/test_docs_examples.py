"""Issue 42: a new user who follows the docs gets the page's numbers. Every Python example in the
README and docs/ runs as written, as a script in a folder of its own (the project installed as
the README's Develop command installs it); the patching example reproduces the page's figures
for the shipped pairs; ``engine.encode`` reads a text as the page does."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.test_readme import fenced_commands, python_examples, run_elsewhere, run_example

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)\n```", flags=re.S | re.M)
IMPORTS = re.compile(r"^(import|from) \w", flags=re.M)
QUOTED = "python no-run"  # a fence that quotes lines of code, deliberately not run
APP_URL = "http://127.0.0.1:7860/"  # the address the gradio_client examples call


def scripts(text: str) -> list[str]:
    """A document's Python as a reader runs it: a ```python block that imports what it uses
    starts a script; a ```python block without an import line continues the one before it
    (``client.predict`` after ``client = Client(…)``), as a reader pastes it below. A block
    that quotes code is fenced ```python no-run and is left out."""
    found: list[str] = []
    for info, code in FENCE.findall(text):
        if info.strip() != "python":
            continue
        if IMPORTS.search(code) or not found:
            found.append(code)
        else:
            found[-1] += "\n" + code
    return found


SCRIPTS = [
    (path.name, i, code)
    for path in DOCS
    for i, code in enumerate(scripts(path.read_text(encoding="utf-8")))
]
EXAMPLES = [
    pytest.param(code, id=f"{name}-{i}") for name, i, code in SCRIPTS if "gradio_client" not in code
]
CLIENT_EXAMPLES = [
    pytest.param(code, id=f"{name}-{i}") for name, i, code in SCRIPTS if "gradio_client" in code
]


def test_the_docs_hold_examples():
    assert len(EXAMPLES) >= 6 and CLIENT_EXAMPLES


def test_every_python_block_is_run_or_marked_as_quoted():
    """Nothing is skipped silently: every ```python block starts a script with its imports or
    continues one; a quoted block says so in its fence; a bare ``` block holds no Python a
    reader would run (an import, or a call of the client)."""
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for info, code in FENCE.findall(text):
            kind = info.strip()
            assert kind in ("python", QUOTED) or not kind.startswith("python"), (path.name, info)
            if not kind:
                assert not IMPORTS.search(code) and "client." not in code, (path.name, code)
        blocks = [code for info, code in FENCE.findall(text) if info.strip() == "python"]
        ran = scripts(text)
        assert all(any(code in script for script in ran) for code in blocks), path.name
        if blocks:  # a script's first block brings its imports: no continuation before it
            assert IMPORTS.search(blocks[0]), path.name


@pytest.mark.parametrize("code", EXAMPLES)
def test_every_python_example_runs_from_another_folder(code, tmp_path):
    done = run_elsewhere(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("code", CLIENT_EXAMPLES)
def test_every_gradio_client_example_runs_against_the_app(code, tmp_path):
    """The docs' ``gradio_client`` scripts (``/run``, in Chinese, then ``/patch``) as a reader
    runs them, against ``python app.py`` on 127.0.0.1 (a free port for the docs' 7860), stopped
    after; each prints what it got, so the values are checked too."""
    from tests.apphost import serve_app

    assert APP_URL in code
    checks = (
        "\nimport json\n"
        "print(json.dumps([type(v).__name__ for v in values]))\n"
        "print(json.dumps([v for v in values if isinstance(v, str)], ensure_ascii=False))\n"
    )
    with serve_app() as (url, _):
        done = run_elsewhere(code.replace(APP_URL, url) + checks, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    kinds, texts = done.stdout.strip().splitlines()[-2:]
    assert len(json.loads(kinds)) > 3, kinds
    said = " ".join(json.loads(texts))
    assert "could not" not in said and "⚠️" not in said, said[:2000]
    if "/patch" in code:  # the copy pair's measure, as the page says it
        assert "+19.240" in said and "L0 H1" in said, said[:2000]


def test_the_quick_start_installs_the_api_and_says_the_cpu_wheel_before_it():
    """Issue 42: after the Quick start, `import model, analysis` works from any folder (its
    command installs the project, `-e .`), and the CPU wheel is said before the command."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme.split("## Quick start")[1].split("\n## ")[0]
    command = fenced_commands(quick)[0]
    assert "-e ." in command.split("pip install", 1)[1].split("&&")[0]
    assert quick.index("download.pytorch.org/whl/cpu") < quick.index("```bash")
    deploy = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    for anchor in re.findall(r"docs/deploy\.md#([a-z-]+)", readme):
        assert f"## {anchor.replace('-', ' ')}" in deploy.lower(), anchor


def patching_example() -> dict:
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    return run_example(next(e for e in python_examples(api) if "patch_heads" in e), "api.md")


@pytest.fixture(scope="module")
def demo():
    import app

    return app.build_demo()


def test_the_patching_example_reproduces_the_pages_figures(demo):
    """The example's numbers are the page's for the shipped copy and trophy pairs: the grids,
    the clean and corrupt measures, the wrong token (issue 42: 7.29, q and L0H3 before)."""
    from dataclasses import replace

    from tests.test_patching_view import patched, z_of
    from ui.handlers import Ask
    from ui.state import Selection

    found = patching_example()
    out = patched(demo, "qzxwv qzxw", "induction", "bhmtk qzxw", page="docs-copy")
    page = z_of(out["patch_heads_plot"])
    np.testing.assert_allclose(found["heads"].numpy(), page, atol=1e-5)
    np.testing.assert_allclose(found["pair"].heads.numpy(), page, atol=1e-5)
    np.testing.assert_allclose(found["resid"].numpy(), z_of(out["patch_resid_plot"]), atol=1e-5)
    pair = found["pair"]
    assert found["net"].tokenizer.convert_ids_to_tokens([pair.wrong]) == ["h"]
    said = out["patch_said"]
    assert f"{pair.m_clean:+.3f}" in said and "+19.240" in said and "‹h›" in said
    assert "L0 H1 62%" in said
    assert abs(float(found["parts"]["logit_diff"]) - pair.m_clean) < 1e-3

    ask = Ask(tab="patching", page="docs-trophy")
    filled = demo.handlers.patching.example(ask, "trophy")
    assert int(filled["read_at"]) == found["it"]
    sel = Selection(pair=filled["pair"], read_at=filled["read_at"])
    shown = demo.views.selection(replace(ask, sel=sel), "patch")
    np.testing.assert_allclose(found["trophy"].numpy(), z_of(shown["patch_heads_plot"]), atol=1e-5)


@pytest.mark.parametrize(
    "model_id, text",
    [
        ("induction", "qzxwv qzxw"),
        ("bert", "The trophy didn't fit in the suitcase because it was too big."),
        ("seed001-decoder", "我喜欢你"),
        ("roles", "我喜欢你"),
    ],
)
def test_encode_reads_a_text_as_the_page_does(demo, model_id, text):
    """What the page patches as its clean run (the page's own trace, a continuation cut off) is
    what ``engine.encode`` gives a script."""
    import torch

    import engine
    from ui.tabs.patching import clean_inputs

    found = demo.views.engine.analyse(text, model_id)
    page = clean_inputs(found)
    ours = engine.encode(found.model.net, text, tokenizer=found.model.tokenizer)
    assert ours.keys() == page.keys()
    for key, value in page.items():
        assert torch.equal(ours[key], value), key


def test_encode_gives_one_input_a_text_for_a_pair_and_cuts_as_the_page():
    import engine
    import model

    net = model.load_trained("induction")
    clean, corrupt = engine.encode(net, "qzxwv qzxw", "bhmtk qzxw")
    assert clean["input_ids"].shape == corrupt["input_ids"].shape == (1, 11)
    assert clean["input_ids"][0, 0] == net.tokenizer.bos_token_id  # the page's start token
    long = engine.encode(net, "ab" * 400)
    assert long["input_ids"].shape[1] == net.config.max_len
    ed = model.load_trained("dates")
    a, b = engine.encode(ed, "2026年11月22日", "2026年11月23日", target="2026-11-22")
    assert a["tgt_ids"] is b["tgt_ids"] or bool((a["tgt_ids"] == b["tgt_ids"]).all())
    assert a["tgt_ids"][0, 0] == ed.tokenizer.bos_token_id
    with pytest.raises(TypeError):
        engine.encode(net)
