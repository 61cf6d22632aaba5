"""Backends by composition: each row of the table makes an object with the Backend face, the
scheduler names none of them, and each inbox kind has its one handler."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.daemon import verbs
from boxagent.engine import ports
from boxagent.engine.backends import REGISTRY, BackendTable, Makings
from boxagent.wire import inbox

ENGINE = Path(__file__).resolve().parents[2] / "boxagent" / "engine"
SETTINGS = {"slurm_poll": 5.0, "slurm_exit_grace": 15.0, "ray_poll": 1.0, "ray_exit_grace": 5.0, "ray_driver_wait": 60.0}


def _protocol_members(proto: type) -> set:
    return {n for n, v in vars(proto).items() if not n.startswith("_") and callable(v)} | \
        set(getattr(proto, "__annotations__", {}))


def test_every_row_makes_a_backend_with_the_whole_face(tmp_path):
    table = BackendTable.from_registry(Makings(Home(str(tmp_path / "home")), Roots(), {}, SETTINGS, lambda t: None))
    for name in REGISTRY:
        backend = table.named(name)
        assert backend.name == name and isinstance(backend.traits, ports.Traits)
        missing = [m for m in _protocol_members(ports.Backend) if not hasattr(backend, m)]
        missing += [m for m in _protocol_members(ports.StageProcesses) if not hasattr(backend.procs, m)]
        assert not missing, (name, missing)
    assert table.named("local") is table.named("local")            # made once
    assert [b.name for b in table.made()] == list(REGISTRY)


def test_the_table_makes_a_backend_only_when_a_run_needs_it(tmp_path):
    made = []
    table = BackendTable({"local": lambda: made.append("local") or "L", "slurm": lambda: made.append("slurm") or "S"})
    assert table.of({"name": "r"}) == "L" and table.of({"backend": "local"}) == "L" and made == ["local"]
    assert table.of({"backend": "slurm"}) == "S" and made == ["local", "slurm"]


def test_the_scheduler_and_its_parts_name_no_backend():
    """A backend's name appears in the table and its own module, never where decisions are made."""
    for module in ("scheduler.py", "requests.py", "views.py", "attempt.py"):
        tree = ast.parse((ENGINE / module).read_text())
        names = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in REGISTRY]
        calls = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and "slurm" in n.attr.lower()]
        assert not names and not calls, (module, names, calls)


def test_each_inbox_kind_has_its_one_handler():
    assert set(verbs.HANDLERS) == set(inbox.KINDS)
    assert all(inspect.isfunction(h) for h in verbs.HANDLERS.values())
