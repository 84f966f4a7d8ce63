"""Issue 42: a new user who follows the docs gets the page's numbers. Every Python example in the
README and docs/ runs as written, as a script in a folder of its own (the project installed as
the README's Develop command installs it); the patching example reproduces the page's figures
for the shipped pairs; ``engine.encode`` reads a text as the page does."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.test_readme import fenced_commands, python_examples, run_elsewhere, run_example

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = [
    pytest.param(code, id=f"{path.name}-{i}")
    for path in DOCS
    for i, code in enumerate(python_examples(path.read_text(encoding="utf-8")))
    # A script a reader runs imports what it uses; a block without an import quotes the code
    # (docs/architecture.md shows lines of it). gradio_client needs a running app:
    # tests/test_api_client.py calls one.
    if re.search(r"^(import|from) ", code, flags=re.M) and "gradio_client" not in code
]


def test_the_docs_hold_examples():
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize("code", EXAMPLES)
def test_every_python_example_runs_from_another_folder(code, tmp_path):
    done = run_elsewhere(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]


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
