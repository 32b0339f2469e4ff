"""The package's import graph: no module imports another that imports it back (directly or
round a longer circle, at module level or inside a function), every module imports alone,
and ``import tenfold`` leaves the TensorLy patch and torch unimported.

Run as a script, it prints the cycles of the graph (nothing when there are none)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tenfold"


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(package, name):
    """Whether `package` (a tenfold module) is a package with a submodule `name` (a .py, an
    extension module or its stub, or a subpackage)."""
    folder = PACKAGE.parent.joinpath(*package.split("."))
    return folder.is_dir() and any(p.name.split(".")[0] == name for p in folder.iterdir())


def import_graph():
    """Module name -> the set of tenfold modules it imports anywhere in its source.
    ``from P import n`` is an edge to P.n when that is a module, else to P itself."""
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        is_package = path.name == "__init__.py"
        edges = graph.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name.split(".")[0] == "tenfold")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = module.split(".")
                    keep = len(parts) - node.level + (1 if is_package else 0)
                    base = ".".join(parts[:keep] + ([node.module] if node.module else []))
                else:
                    base = node.module
                if base.split(".")[0] != "tenfold":
                    continue
                for alias in node.names:
                    edges.add(f"{base}.{alias.name}" if _is_module(base, alias.name) else base)
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (or a module importing
    itself), each sorted (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_the_imports_it_must():
    graph = import_graph()
    assert "tenfold._tensorly_args" in graph["tenfold"]
    assert "tenfold._tenfold" in graph["tenfold.sparse"]  # an import inside a function
    assert "tenfold.torch.rotary" in graph["tenfold.torch._convert"]
    assert "tenfold" in graph["tenfold.tensorly"]  # from . import _cp: the package itself
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    assert cycles(import_graph()) == []


@pytest.mark.parametrize("module", sorted(_module_name(p) for p in PACKAGE.rglob("*.py")))
def test_every_module_imports_alone(module):
    if module.startswith("tenfold.torch"):
        pytest.importorskip("torch")
    run = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_import_tenfold_leaves_the_patch_and_torch_alone():
    code = "import sys, tenfold; print(sorted({'tenfold.tensorly', 'torch'} & set(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


if __name__ == "__main__":
    for cycle in cycles(import_graph()):
        print(" -> ".join(cycle))
