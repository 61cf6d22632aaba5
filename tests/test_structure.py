"""The tree keeps its shape: no module imports a module that imports it back (lazy imports inside
functions count too), and the layers of the agent only ever import downwards."""
from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Dict, List, Set

REPO = Path(__file__).resolve().parent.parent

# Each layer may import its own and the layers after it, never one before it.
LAYERS = [
    ("cli", ["boxagent.cli", "boxagent.__main__", "boxagent.api"]),   # api: the client's one seam
    ("daemon", ["boxagent.daemon"]),
    ("engine", ["boxagent.engine"]),
    ("parts", ["boxagent.health", "boxagent.triage", "boxagent.notify", "boxagent.artifacts",
               "boxagent.runlog", "boxagent.slurm", "boxagent.cost", "boxagent.raynode"]),
    ("wire", ["boxagent.wire"]),
    ("base", ["boxagent.base", "boxagent"]),
]


def _modules(pkg: str) -> Dict[str, Path]:
    out = {}
    for path in (REPO / pkg).rglob("*.py"):
        rel = path.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(path: Path, name: str, known: Set[str]) -> Set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:
                base = ".".join(name.split(".")[:-node.level] + [node.module])
            subs = ["%s.%s" % (base, a.name) for a in node.names]
            # `from pkg import sub` imports the submodule; the package face only for its own names
            targets = [s for s in subs if s in known] or [base]
            if any(s not in known for s in subs):
                targets.append(base)
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


@functools.lru_cache(maxsize=1)   # read once: every rule below asks the same tree
def _graph() -> Dict[str, Set[str]]:
    mods = dict(_modules("boxagent"), **_modules("rgt_client"))
    known = set(mods)
    return {name: _imports(path, name, known) - {"boxagent"} for name, path in mods.items()}


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[List[str]] = []
    counter = [0]

    def visit(root: str) -> None:
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return out


def _layer(name: str) -> int:
    best, rank = -1, len(LAYERS)
    for i, (_label, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    return rank


def test_no_module_imports_one_that_imports_it_back():
    assert _cycles(_graph()) == []


def test_the_agents_layers_only_import_downwards():
    wrong = []
    for name, deps in _graph().items():
        if not name.startswith("boxagent"):
            continue
        for dep in deps:
            if dep.startswith("boxagent") and _layer(dep) < _layer(name):
                wrong.append("%s -> %s" % (name, dep))
    assert wrong == [], "\n".join(sorted(wrong))


def test_the_agent_never_imports_the_client():
    assert not [(n, d) for n, deps in _graph().items() if n.startswith("boxagent")
                for d in deps if d.startswith("rgt_client")]


def test_every_package_ships_in_a_plain_install():
    """A plain (non-editable) install ships only the packages pyproject.toml lists: a new folder
    left out of the list imports in the checkout and fails in a user's install."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for pkg in ("boxagent", "rgt_client")
             for p in (REPO / pkg).rglob("__init__.py") if "__pycache__" not in p.parts}
    assert found - listed == set()


# -- the client's house: feature folders over one connection layer, one seam into the agent -----

CLIENT_BASE = {"rgt_client", "rgt_client.errors", "rgt_client.exitcodes", "rgt_client.textsafe",
               "rgt_client.options"}      # the top-level helpers every feature may use
CLIENT_ENTRY = {"rgt_client.cli", "rgt_client.entry"}   # above every feature: they pick one


def _folder(name: str) -> str:
    """rgt_client.pull.verify -> rgt_client.pull; a top-level module is its own room."""
    parts = name.split(".")
    if parts[0] == "rgt_client" and len(parts) > 1 and (REPO / "rgt_client" / parts[1]).is_dir():
        return "rgt_client." + parts[1]
    return name


def _client_graph() -> Dict[str, Set[str]]:
    return {n: d for n, d in _graph().items() if n.startswith("rgt_client")}


def test_the_client_imports_the_agent_only_through_its_api():
    wrong = ["%s -> %s" % (n, d) for n, deps in _client_graph().items() for d in sorted(deps)
             if d.startswith("boxagent") and d != "boxagent.api"]
    assert wrong == [], "\n".join(sorted(wrong))


def test_the_connection_layer_and_the_helpers_import_no_feature():
    low = lambda n: _folder(n) == "rgt_client.box" or n in CLIENT_BASE   # noqa: E731
    wrong = ["%s -> %s" % (n, d) for n, deps in _client_graph().items() if low(n) for d in sorted(deps)
             if d.startswith("rgt_client") and not low(d)]
    assert wrong == [], "\n".join(sorted(wrong))


def test_the_clients_feature_folders_import_each_other_without_a_cycle():
    folders: Dict[str, Set[str]] = {}
    for name, deps in _client_graph().items():
        if name in CLIENT_ENTRY:
            continue
        folders.setdefault(_folder(name), set()).update(
            _folder(d) for d in deps if d.startswith("rgt_client") and _folder(d) != _folder(name))
    assert _cycles(folders) == []
    assert not any(CLIENT_ENTRY & deps for deps in folders.values())


def test_each_feature_keeps_its_commands_in_its_cmd_py():
    from rgt_client.cli import COMMAND_MODULES
    assert all(m.endswith(".cmd") and (REPO / m.replace(".", "/")).with_suffix(".py").exists()
               for m in COMMAND_MODULES)
    top = sorted(p.name for p in (REPO / "rgt_client").glob("*.py"))
    assert len(top) <= 10, top     # the rest lives in a folder per feature


def _marks_slow(node: ast.AST) -> bool:
    """A decorator or pytestmark value that names the `slow` mark (pytest.mark.slow, or a list
    or a parametrize holding it)."""
    return any(isinstance(n, ast.Attribute) and n.attr == "slow" for n in ast.walk(node))


def _fast_tests(path: Path) -> List[str]:
    """The test functions of a file that `-m "not slow"` still runs."""
    tree = ast.parse(path.read_text(), str(path))
    if any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
           and _marks_slow(n.value) for n in tree.body):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            if not any(_marks_slow(d) for d in node.decorator_list):
                found.append(node.name)
    return found


def test_the_fast_subset_covers_every_test_folder():
    """`pytest -m "not slow"` is the inner loop a contributor runs before each push: a folder of
    tests whose every test is marked slow would be skipped there whole, and its module's
    breakage found only by the full run (the README's command, CI's)."""
    folders: Dict[Path, List[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        folders.setdefault(path.parent, []).extend(_fast_tests(path))
    assert len(folders) >= 14, sorted(folders)
    assert [str(f.relative_to(REPO)) for f, fast in folders.items() if not fast] == []


def test_the_slow_mark_is_found_where_it_is_written(tmp_path):
    """The check above reads marks from the source: it must see each way a file writes one."""
    cases = {
        "pytestmark = [pytest.mark.ssh, pytest.mark.slow]\ndef test_a(): pass\n": [],
        "pytestmark = pytest.mark.slow\ndef test_a(): pass\n": [],
        "@pytest.mark.slow\ndef test_a(): pass\ndef test_b(): pass\n": ["test_b"],
        "class TestX:\n    @pytest.mark.slow\n    def test_a(self): pass\n    def test_b(self): pass\n": ["test_b"],
        "pytestmark = pytest.mark.ssh\ndef test_a(): pass\n": ["test_a"],
    }
    for text, fast in cases.items():
        (tmp_path / "test_x.py").write_text("import pytest\n" + text)
        assert _fast_tests(tmp_path / "test_x.py") == fast, text
