"""The floors hold (issue 35): the project's own files import each other in no circle, and no
file imports from a floor above its own. docs/architecture.md draws the same floors; the test
reads the imports of every .py file of the repository (tests/ and bench/ aside, they stand
outside the house) with ``ast``, function-local imports included (``if TYPE_CHECKING:`` ones,
never run, aside)."""

from __future__ import annotations

import ast
import re

from tests.conftest import ROOT

# Bottom first. A file may import from its own package or module, or from a lower floor; two
# names on one floor stand beside each other and import neither.
FLOORS = [
    ["lang"],  # lang.py: the language the server writes in
    ["model"],  # the Transformer, its Trace, loading checkpoints and tokenizers
    ["analysis", "train"],  # numbers over a trace; training the small models
    ["viz"],  # figures, tables and HTML from a trace
    ["shelf"],  # shelf.py: the models the engine keeps, and which loader opens one
    ["serve"],  # the server's guards and its shared state (trainings, downloads)
    ["engine"],  # engine.py: encoding, one forward pass, the trace cache
    ["ui"],  # the page
    ["app"],  # app.py: composes and launches
]
FLOOR = {unit: level for level, units in enumerate(FLOORS) for unit in units}
OUTSIDE = {"tests", "bench", ".venv"}


def project_files() -> dict[str, object]:
    """Module name -> path, for every .py file of the project."""
    files = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[0] in OUTSIDE or any(p.startswith(".") for p in parts):
            continue
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def runtime_nodes(tree: ast.AST):
    """Every node of the tree but those under ``if TYPE_CHECKING:`` (names for type hints only,
    never imported when the code runs)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            yield from (n for child in node.orelse for n in [child, *runtime_nodes(child)])
            continue
        yield node
        yield from runtime_nodes(node)


def imports(files: dict[str, object]) -> dict[str, set[str]]:
    """Module name -> the project modules it imports (the module named, or the submodule a
    ``from package import name`` names)."""
    tops = {name.split(".")[0] for name in files}
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, or one up per extra dot
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in files else base)
        graph[name] = {m for m in found if m.split(".")[0] in tops and m != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


GRAPH = imports(project_files())


def test_every_package_and_top_level_module_has_a_floor():
    units = {name.split(".")[0] for name in GRAPH}
    assert units == set(FLOOR), (units - set(FLOOR), set(FLOOR) - units)


def test_no_import_circle_between_project_files():
    assert not circles(GRAPH), circles(GRAPH)


def test_no_floor_imports_from_a_floor_above_or_beside_it():
    wrong = [
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if (unit := name.split(".")[0]) != (other := target.split(".")[0])
        and FLOOR[other] >= FLOOR[unit]
    ]
    assert not wrong, wrong


def test_the_architecture_draws_these_floors():
    """docs/architecture.md's floor drawing lists the same units, top floor first, one floor a
    line (two names on a line stand beside each other)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    drawing = re.search(r"## Floors\n.*?```\n(.*?)```", text, re.S)[1]
    drawn = []
    for line in drawing.splitlines():
        if line.strip():
            names = re.split(r"\s{2,}", line.strip())[0].split(",")
            drawn.append(sorted(n.strip().rstrip("/").removesuffix(".py") for n in names))
    assert drawn == [sorted(units) for units in reversed(FLOORS)]
