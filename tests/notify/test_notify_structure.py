"""The notify package's shape: no import circle, one registry row per format, and the hub is a
Part whose delivery threads see only their Lane."""
from __future__ import annotations

import ast
from pathlib import Path

import boxagent.notify as pkg

NOTIFY = Path(pkg.__file__).parent


def _imports(path: Path) -> set:
    """Every boxagent.notify module a module imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "boxagent.notify":
                out.update(a.name for a in node.names)
            elif node.module.startswith("boxagent.notify."):
                out.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[2] for a in node.names if a.name.startswith("boxagent.notify."))
    return out


def test_no_module_imports_a_module_that_imports_it_back():
    graph = {p.stem: _imports(p) - {p.stem} for p in NOTIFY.glob("*.py") if p.stem != "__init__"}

    def reaches(start: str, goal: str, seen: set) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and (seen.add(nxt) or reaches(nxt, goal, seen))):
                return True
        return False
    circles = sorted(m for m in graph if reaches(m, m, set()))
    assert circles == []


def test_service_modules_import_only_the_shared_types_and_messages():
    for name in ("chat", "hooks", "ntfy", "sinks"):
        assert _imports(NOTIFY / (name + ".py")) <= {"types", "messages"}, name


def test_one_registry_row_per_format_and_config_agrees():
    from boxagent.notify import config, registry
    assert [r.name for r in registry.ROWS] == list(config.FORMATS)
    assert set(config.DEADMAN_FORMATS) == {"ntfy", "healthchecks"}
    for row in registry.ROWS:
        assert (row.request is None) != (row.deliver is None), row.name


def test_hub_is_a_part_and_workers_see_only_their_lane():
    from boxagent.base.part import Part
    from boxagent.notify.hub import NotifyHub
    assert issubclass(NotifyHub, Part)
    src = (NOTIFY / "delivery.py").read_text() + (NOTIFY / "schedule.py").read_text()
    assert "hub." not in src and "hub._" not in src
