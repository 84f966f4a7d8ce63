"""docs/architecture.md names what is there (issue 27: it had drifted): every file or folder it
names in backticks exists, and it names every module of serve/ and every script of ui/js/."""

from __future__ import annotations

import re

from tests.conftest import ROOT

DOC = ROOT / "docs" / "architecture.md"


def named_paths() -> set[str]:
    """The repository paths the document names in backticks, outside its fenced blocks (a path
    has a folder and no spaces, wildcards or placeholders: `ui/js/core.js`, `serve/`)."""
    text = re.sub(r"```.*?```", "", DOC.read_text(encoding="utf-8"), flags=re.S)
    spans = re.findall(r"`([^`\n]+)`", text)
    return {s for s in spans if re.fullmatch(r"[A-Za-z_][\w.-]*(/[\w.-]+)*/?", s) and "/" in s}


def test_every_path_the_architecture_names_exists():
    paths = named_paths()
    assert {"ui/js/core.js", "serve/turns.py", "ui/events.py"} <= paths  # it reads them
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, missing


def test_the_architecture_names_every_serve_module_and_every_page_script():
    paths = named_paths()
    files = [*sorted((ROOT / "serve").glob("*.py")), *sorted((ROOT / "ui" / "js").glob("*.js"))]
    unnamed = [
        str(f.relative_to(ROOT))
        for f in files
        if f.name != "__init__.py" and str(f.relative_to(ROOT)) not in paths
    ]
    assert not unnamed, unnamed


def test_the_architecture_names_every_floor():
    floors = re.search(r"## Floors\n.*?```\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    lines = [line.strip() for line in floors[1].splitlines() if line.strip()]
    listed = {name.strip() for line in lines for name in re.split(r"\s{2,}", line)[0].split(",")}
    floors = {"app.py", "ui/", "viz/", "analysis/", "model/", "engine.py", "train/", "serve/"}
    assert floors <= listed, floors - listed
