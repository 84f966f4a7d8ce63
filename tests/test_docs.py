"""The documents say what the code does: the link-parameter table, the links between documents."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.conftest import ROOT
from ui import state
from ui.tabs import TAB_IDS

LINK_DOC = ROOT / "docs" / "link-parameters.md"
DEFAULT = state.ViewState("time flies like an arrow", "bert")
# The parameters whose value is one of a few words, and those words, as the code names them.
CHOICES = {
    "tab": TAB_IDS,
    "stack": state.STACKS,
    "bertviz_view": state.RULES["bertviz_view"].choices,
    "scale": state.RULES["scale"].choices,
    "measure": state.RULES["measure"].choices,
    "ablation": state.RULES["ablation"].choices,
    "pe": ("on", "off"),
    "corpus": state.CORPORA,
}


def link_table() -> dict[str, str]:
    """docs/link-parameters.md's table: parameter name -> its "values" cell."""
    rows: dict[str, str] = {}
    for line in LINK_DOC.read_text(encoding="utf-8").splitlines():
        found = re.match(r"\|\s*`([a-z_]+)`\s*\|([^|]*)\|", line)
        if found:
            assert found.group(1) not in rows, f"{found.group(1)} has two rows"
            rows[found.group(1)] = found.group(2)
    return rows


def rejected(query: str) -> list[str]:
    """The sentences parse_link says about a query (one per ignored parameter)."""
    return state.parse_link(query, {"bert"}, TAB_IDS, DEFAULT)[1]


def test_link_table_names_exactly_the_parameters_parse_link_accepts():
    assert set(link_table()) == set(state.LINK_PARAMETERS)
    assert len(state.LINK_PARAMETERS) == len(set(state.LINK_PARAMETERS))


def test_link_parameters_is_what_parse_link_knows():
    for name in state.LINK_PARAMETERS:  # any value: at worst it is an invalid value, not a name
        assert not any("is not a link parameter" in r for r in rejected(f"{name}=x")), name
    assert any("is not a link parameter" in r for r in rejected("colour=red"))
    assert set(state.SELECTION_FIELDS) <= set(state.LINK_PARAMETERS)


@pytest.mark.parametrize("name", sorted(CHOICES))
def test_every_choice_is_in_its_row_and_every_written_value_is_accepted(name):
    cell = link_table()[name]
    written = set(re.findall(r"`([^`]+)`", cell))
    assert set(CHOICES[name]) == written, f"{name}: the row says {written}"
    for value in written:
        assert rejected(f"{name}={value}") == [], (name, value)
    assert rejected(f"{name}=nonsense"), name


def test_whole_number_parameters_say_so():
    table = link_table()
    for name in state.INT_FIELDS:
        assert "whole number" in table[name], name
        assert rejected(f"{name}=9999") == [] and rejected(f"{name}=-1"), name


def markdown_files() -> list:
    return [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_relative_links_in_the_documents_resolve():
    for doc in markdown_files():
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (doc.parent / target.split("#")[0]).resolve()
            assert path.exists(), f"{doc.relative_to(ROOT)} links to {target}"


def test_no_document_or_library_points_outside_the_repository():
    """A clone has none of the planning documents that lived beside the repository (the design,
    style and Gradio notes, the shared folder): say the fact, or point at docs/."""
    names = ("DESIGN", "STYLE", "GRADIO6")
    pattern = "|".join(rf"{name}\.md" for name in names) + "|" + "shared" + "/"
    paths = ["*.md", "model", "viz", "analysis", "bench", "train", "tests", "serve", "engine.py"]
    paths += ["lang.py", "app.py", "ui"]
    found = subprocess.run(
        ["git", "grep", "-nE", pattern, "--", *paths, ":!tests/test_docs.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode == 128:
        pytest.skip("not a git checkout")
    assert found.stdout == ""


def test_bench_table_has_one_row_per_benchmark_script():
    text = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    table = text.split("## The table")[1].split("\n## ")[0]
    rows = re.findall(r"^\| `([a-z_]+\.py)` \|", table, flags=re.M)
    scripts = {p.name for p in (ROOT / "bench").glob("*.py")} - {"shapes.py"}  # a helper
    assert len(rows) == len(set(rows))
    assert scripts == set(rows)
    for line in table.splitlines():
        if line.startswith("| `"):
            assert len(line.replace("\\|", "").split("|")) == 8, line  # six cells
