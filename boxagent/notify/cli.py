"""`rgt-agent notify-set` (config JSON on stdin -> secrets.json 0600) and `notify-test [--json]`.

The config never travels in argv (ps would show it): the client pipes it over ssh stdin. The
daemon notices secrets.json changing within a second and reloads its notifiers.
"""
from __future__ import annotations

import json
import os
import secrets as _secrets
import sys
from typing import Any, Dict, List

from boxagent.base.errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, AgentError, UsageError
from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.base.home import Home


def register(sub) -> None:
    p = sub.add_parser("notify-set", help="set the notifiers from JSON on stdin (writes secrets.json, 0600)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_notify_set)
    p = sub.add_parser("notify-test", help="send a test message through every notifier, print each result")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--timeout", type=float, default=15.0,
                   help="total seconds for each request; all notifiers are tried at once (default 15)")
    p.set_defaults(func=cmd_notify_test)


def _home(args: Any) -> Home:
    return Home.from_env(args.home)


def read_stdin_config() -> List[Dict[str, Any]]:
    raw = sys.stdin.buffer.read()
    try:
        data = json.loads(raw.decode("utf-8") or "null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError("the notifier config on stdin is not JSON (%s)" % type(exc).__name__,
                         "use `rgt-client notify-set HOST FILE` with a TOML file of [[notify]] tables")
    if isinstance(data, dict):
        data = data.get("notify")
    if not isinstance(data, list):
        raise UsageError("expected {\"notify\": [...]} on stdin",
                         "use `rgt-client notify-set HOST FILE` with a TOML file of [[notify]] tables")
    return data


def assign_ids(entries: List[Dict[str, Any]], old: List[Any]) -> List[Dict[str, Any]]:
    """Keep a notifier's id when its URL is unchanged (its outbox files stay its own); else a new one."""
    by_url = {e.get("url"): e.get("id") for e in old if isinstance(e, dict) and e.get("id")}
    used = set()
    out = []
    for e in entries:
        e = dict(e)
        if not e.get("id"):
            nid = by_url.get(e.get("url"))
            while not nid or nid in used:
                nid = "n" + _secrets.token_hex(4)
            e["id"] = nid
        used.add(e["id"])
        out.append(e)
    return out


def cmd_notify_set(args: Any) -> int:
    from boxagent.notify.config import NotifyConfigError, parse_notifiers
    home = _home(args)
    entries = read_stdin_config()
    try:
        parse_notifiers(entries)
    except NotifyConfigError as exc:
        raise UsageError(exc.message, exc.hint)
    old = (read_json(home.secrets, {}) or {})
    given = old.get("notify") if isinstance(old, dict) else None
    old_entries = given if isinstance(given, list) else []
    entries = assign_ids(entries, old_entries)
    notifiers = parse_notifiers(entries)
    home.ensure()
    data = dict(old) if isinstance(old, dict) else {}
    data["notify"] = entries
    atomic_write_json(home.secrets, data, 0o600)
    os.chmod(home.secrets, 0o600)
    _tell_daemon(home)
    targets = [n.public() for n in notifiers]
    if args.json:
        sys.stdout.write(json.dumps({"notifiers": targets}, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write("%d notifier%s set\n" % (len(targets), "" if len(targets) == 1 else "s"))
        for t in targets:
            sys.stdout.write("  %-10s %-13s %s\n" % (t["id"], t["format"], t["target"]))
    return EXIT_OK


def _tell_daemon(home: Home) -> None:
    """Ask a running daemon to reload now (it would also notice secrets.json's mtime within a tick)."""
    from boxagent.wire import inbox   # here: notify-test needs none of it
    try:
        inbox.post(home, "notify-set", {})
    except OSError:       # inbox/ not writable: the daemon still notices secrets.json's mtime
        pass


def cmd_notify_test(args: Any) -> int:
    from boxagent.notify.hub import NotifyHub
    from boxagent.base import profile as profile_mod
    home = _home(args)
    config = read_json(home.config, {}) or {}
    hub = NotifyHub(home, config, profile_mod.load(home))
    if not hub.notifiers and not hub.config_errors:
        raise AgentError("no notifiers are configured on this box", "rgt-client notify-set HOST FILE",
                         EXIT_USAGE)
    results = hub.send_test(timeout=args.timeout)
    ok = all(r["ok"] for r in results) and not hub.config_errors
    if args.json:
        sys.stdout.write(json.dumps({"ok": ok, "results": results, "config_errors": hub.config_errors},
                                    ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render_results(results, hub.config_errors))
    return EXIT_OK if ok else EXIT_ERROR


def render_results(results: List[Dict[str, Any]], config_errors: List[str]) -> str:
    lines = []
    for r in results:
        mark = "ok  " if r["ok"] else "FAIL"
        detail = ("HTTP %s" % r["status"]) if r["ok"] and r.get("status") else (r.get("error") or "sent")
        lines.append("%s %-10s %-13s %-34s %s (%.2fs)" % (mark, r["id"], r["format"], r["target"], detail,
                                                          r["elapsed_s"]))
    for e in config_errors:
        lines.append("FAIL config: %s" % e)
    return "\n".join(lines) + "\n"
