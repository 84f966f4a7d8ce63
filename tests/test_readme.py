"""The README's promises: CI runs its test command, the Spaces front matter is complete."""

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


def test_python_api_example_runs_as_written():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = re.search(r"```python\n(.+?)\n```", readme, flags=re.S).group(1)
    namespace: dict = {}
    exec(compile(example, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    assert namespace["head"].shape[0] == namespace["head"].shape[1]
    assert namespace["tr"].attentions["cross"].dim() == 5


def test_readme_screenshots_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in re.findall(r"\((docs/screenshots/[^)]+\.png)\)", readme):
        assert (ROOT / path).is_file(), path


def test_trained_models_and_analysis_example_runs_as_written():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    examples = re.findall(r"```python\n(.+?)\n```", readme, flags=re.S)
    example = next(e for e in examples if "load_trained" in e)
    namespace: dict = {}
    exec(compile(example, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    assert namespace["net"].tokenizer.decode(namespace["ids"][0]).endswith("2026-11-22")
    assert namespace["tr"].attentions["encoder"].shape[1:3] == (6, 12)
