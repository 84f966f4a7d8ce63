"""The README's promises: CI runs its test command, the Spaces front matter is complete, its
examples run, and what it names (tabs, Trace fields, analysis functions, folders) exists."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def fenced_commands(text: str) -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", text, flags=re.S)


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    test_command = next(c for c in fenced_commands(readme) if "pytest" in c)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_command in ci.splitlines()
    assert "set -euo pipefail" in ci  # pytest's exit 5 (no tests) fails CI


def test_readme_run_command_installs_and_starts_the_app():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    run_command = next(c for c in fenced_commands(readme) if "app.py" in c)
    assert "pip install -r requirements.txt" in run_command


def test_spaces_front_matter():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    front = readme.split("---")[1]
    for line in (
        "sdk: gradio",
        "sdk_version: 6.31.0",
        'python_version: "3.12"',
        "app_file: app.py",
    ):
        assert line in front


def test_torch_stays_pinned():
    req = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    assert "torch==2.13.0" in req.splitlines()


def python_examples(text: str) -> list[str]:
    return re.findall(r"```python\n(.+?)\n```", text, flags=re.S)


def run_example(example: str, name: str) -> dict:
    namespace: dict = {}
    exec(compile(example, name, "exec"), namespace)  # noqa: S102 - our own documents
    return namespace


def run_elsewhere(code: str, folder):
    """``code`` as a script run in ``folder``, with no PYTHONPATH: as a reader's own script."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_python_api_example_runs_as_written():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    namespace = run_example(python_examples(readme)[0], "README.md")
    assert namespace["head"].shape[0] == namespace["head"].shape[1]
    tr = namespace["tr"]
    assert tr.attentions["encoder"].dim() == 5
    assert len(namespace["stats"]) == 6 * 12  # one row per (layer, head)
    assert namespace["flow"].shape[1] == 6


def test_the_api_doc_names_the_trace_fields_and_every_analysis_function():
    """docs/api.md (the README points there): every Trace field it lists exists, and it names
    every function ``analysis`` exports."""
    import analysis
    from model.trace import Trace

    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    holds = api.split("A `Trace` holds")[1].split("`tr.cpu()`")[0]
    fields = re.findall(r"`([a-z_]+)`", holds)
    assert {"attentions", "scores", "hidden_states", "masks", "tokens", "mlp_out"} <= set(fields)
    for name in fields:
        assert hasattr(Trace, name) or name in Trace.__dataclass_fields__, name
    paragraph = api.split("`analysis` holds pure functions")[1].split("\n\n")[0]
    named = set(re.findall(r"`([a-z][a-z_0-9]*)`", paragraph))
    assert set(analysis.__all__) <= named, set(analysis.__all__) - named
    assert named - set(analysis.__all__) <= {"head_mask", "net"}  # not functions of analysis
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "[docs/api.md](docs/api.md)" in readme.split("## From Python")[1].split("\n## ")[0]


def test_the_readme_stays_short():
    """Issue 27: at most 200 lines; details go to docs/ (the README points there)."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, len(lines)


def test_api_doc_examples_run_as_written():
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    examples = [e for e in python_examples(api) if "gradio_client" not in e]
    first = run_example(next(e for e in examples if "PRESETS" in e), "docs/api.md")
    assert first["head"].shape[0] == first["head"].shape[1]
    assert first["tr"].attentions["cross"].dim() == 5
    trained = run_example(next(e for e in examples if '"dates"' in e), "docs/api.md")
    assert trained["net"].tokenizer.decode(trained["ids"][0]).endswith("2026-11-22")
    assert trained["tr"].attentions["encoder"].shape[1:3] == (6, 12)


def test_readme_has_one_line_per_tab_in_order():
    from ui.tabs import TABS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The views")[1].split("\n## ")[0]
    labels = re.findall(r"^- \*\*(.+?)\*\*:", section, flags=re.M)
    assert labels == [tab.label for tab in TABS]


def test_readme_parity_claim_is_the_tested_tolerance():
    from tests import test_bert_parity

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"within\n{test_bert_parity.TOL:.0e}".replace("e-0", "e-") in readme


def test_readme_lecture_features_exist():
    page_js = (ROOT / "ui" / "js" / "core.js").read_text(encoding="utf-8")
    assert "q.get('present') === '1'" in page_js  # ?present=1
    from ui.i18n import LOCALES

    assert ("简体中文", "zh-CN") in LOCALES  # ?lang=zh-CN and the switch


def test_readme_layout_names_folders_that_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Develop")[1]
    for path in re.findall(r"^- `([^`]+)`", section, flags=re.M):
        assert (ROOT / path).exists(), path
    for path in re.findall(r"[;,] `([a-z_./]+/|[a-z_]+\.py)`", section):
        assert (ROOT / path).exists(), path


def test_readme_screenshots_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in re.findall(r"\((docs/screenshots/[^)]+\.png)\)", readme):
        assert (ROOT / path).is_file(), path


def test_python_api_example_runs_from_outside_the_repository(tmp_path):
    """Issue 27: saved as a script anywhere, the README's example finds `analysis` and `model`
    (the Develop command installs the project editable: requirements-dev.txt's `-e .`)."""

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = python_examples(readme)[0] + "\nprint(len(stats), tuple(flow.shape[:2]))\n"
    done = run_elsewhere(example, tmp_path)
    assert done.returncode == 0, (
        "the README's example fails outside the repository; `pip install -e .` (the Develop "
        "command's requirements-dev.txt does it) makes the project importable:\n" + done.stderr
    )
    assert done.stdout.split("\n")[-2] == "72 (1, 6)"


def test_the_project_installs_with_its_pinned_requirements():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["build-system"]["build-backend"] == "setuptools.build_meta"
    dynamic = project["tool"]["setuptools"]["dynamic"]["dependencies"]
    assert dynamic == {"file": ["requirements.txt"]}  # torch==2.13.0 pinned in one place
    assert "-e ." in (ROOT / "requirements-dev.txt").read_text(encoding="utf-8").splitlines()
