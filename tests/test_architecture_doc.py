"""docs/architecture.md names what is there (issues 27 and 35: it had drifted): every file or
folder it names in backticks exists, and it names every package and top-level module, every
module of model/, serve/ and the layer walk, and every script of ui/js/."""

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


def test_the_architecture_names_every_package_and_top_level_module():
    """Every package, every top-level module and deploy/ is named (its floor is drawn too:
    tests/test_floors.py), and so is every module of model/ and of the layer walk."""
    text = DOC.read_text(encoding="utf-8")
    spans = set(re.findall(r"`([^`\n]+)`", text))
    packages = [f"{d.name}/" for d in ROOT.iterdir() if (d / "__init__.py").exists()]
    modules = [f.name for f in ROOT.glob("*.py")]
    assert {"model/", "ui/", "serve/"} <= set(packages) and "engine.py" in modules
    files = [*sorted((ROOT / "model").glob("*.py")), *sorted(ROOT.glob("*/layer_*.py"))]
    walk = ["ui/tabs/layer.py", "ui/js/layer_switch.js", "viz/layer_steps.py"]
    named = [*packages, *modules, "deploy/", *walk]
    named += [str(f.relative_to(ROOT)) for f in files if f.name != "__init__.py"]
    unnamed = sorted(n for n in named if n not in spans)
    assert not unnamed, unnamed


def test_no_tab_imports_another_and_the_modules_they_share_import_no_tab():
    """The registry's rule (issue 52: How the heads connect imported Which heads matter's tab,
    and ui/circuit_measures.py read that tab): a tab module imports ui.tabs.base and no other
    tab; the modules two tabs share import no tab and are named in the document."""
    import ast

    def imported(path) -> set[str]:
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        return found

    folder = ROOT / "ui" / "tabs"
    tabs = {f"ui.tabs.{f.stem}" for f in folder.glob("*.py")} - {"ui.tabs.__init__", "ui.tabs.base"}
    for path in folder.glob("*.py"):
        if path.name != "__init__.py":
            assert not imported(path) & tabs, path.name
    shared = ["ui/pair_words.py", "ui/patching_inputs.py", "ui/patching_measures.py",
              "ui/circuit_measures.py"]  # fmt: skip
    for name in shared:
        assert not {m for m in imported(ROOT / name) if m.startswith("ui.tabs.")}, name
    spans = set(re.findall(r"`([^`\n]+)`", DOC.read_text(encoding="utf-8")))
    assert all(name in spans for name in shared), shared
