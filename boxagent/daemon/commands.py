"""Core subcommands: start daemon stop configure submit cancel resume status logs handbook version
(+ exec-stage, the shim). Thin handlers over plain functions (control.py, runverbs.py, reading.py, status.py);
data to stdout, diagnostics to stderr, AgentError for anything a user must fix.

Imports are lazy (inside the handlers): registering the commands imports none of their modules, and
each command loads only what it uses. From the .pyz every module is compiled from source on every
call, so each module skipped makes the client's one-round-trip `status` faster.
"""
from __future__ import annotations

import sys

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Any

from boxagent.base import names, quickjson
from boxagent.base.errors import EXIT_NOT_RUNNING, EXIT_OK, UsageError
from boxagent.base.home import Home
from boxagent.base.roots import Roots


def register(sub: Any) -> None:
    p = sub.add_parser("start", help="start the daemon detached (idempotent); prints its pid")
    p.add_argument("--resume-interrupted", action="store_true",
                   help="requeue runs interrupted by a machine restart or preemption (for an @reboot entry)")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds to wait for its first status.json")
    p.set_defaults(func=cmd_start)

    p = sub.add_parser("daemon", help="run the daemon in the foreground")
    p.add_argument("--resume-interrupted", action="store_true")
    p.set_defaults(func=cmd_daemon)

    p = sub.add_parser("stop", help="stop the daemon; stages keep running and are re-adopted later")
    p.add_argument("--timeout", type=float, default=15.0)
    p.add_argument("--kill", action="store_true",
                   help="also end every running stage and all of its processes (TERM, then KILL); runs end cancelled")
    p.set_defaults(func=cmd_stop)

    p = sub.add_parser("configure", help="write config.json from a JSON object on stdin "
                                            "(its cost block is merged into the current one; null removes a key)")
    p.set_defaults(func=cmd_configure)

    p = sub.add_parser("submit", help="validate a job (JSON; TOML on Python 3.11+) and queue it")
    p.add_argument("file", metavar="FILE|-")
    p.add_argument("--json", action="store_true", help='print {"run", "state", "duplicate"}')
    p.add_argument("--replace", action="store_true",
                   help="reuse the name of a finished run (the old run is moved to runs/.archive/)")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("cancel", help="stop a run: TERM its stage, KILL after stop_grace; no marker")
    p.add_argument("run", type=names.argtype("run"))
    which = p.add_mutually_exclusive_group()
    which.add_argument("--group", dest="kind", action="store_const", const="group",
                       help="RUN names a sweep: cancel every run of it")
    which.add_argument("--run", dest="kind", action="store_const", const="run", help="RUN names one run")
    p.add_argument("--wait", type=float, default=5.0, help="seconds to wait for the run to end")
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("resume", help="requeue a failed/interrupted/cancelled run from its last marker")
    p.add_argument("run", type=names.argtype("run"))
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("status", help="the box status (works with the daemon dead)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--run", metavar="NAME", type=names.argtype("run"))
    p.add_argument("--all", dest="all_runs", action="store_true",
                   help="every run, the ended ones status.json no longer holds too (read from their files)")
    p.add_argument("--events", type=int, default=None, metavar="N",
                   help="how many recent events to include")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("logs", help="the tail of the stage logs (all stages that ran, or --stage)")
    p.add_argument("run", type=names.argtype("run"))
    p.add_argument("--stage", type=names.argtype("stage"))
    p.add_argument("-n", type=int, default=100, help="lines (0 = all)")
    p.add_argument("--attempt", type=int)
    p.set_defaults(func=cmd_logs)

    p = sub.add_parser("handbook", help="print the run's HANDBOOK.md")
    p.add_argument("run", type=names.argtype("run"))
    p.set_defaults(func=cmd_handbook)

    p = sub.add_parser("version", help="version, build sha256, python")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_version)

    # = shim.register(sub), without importing the shim (subprocess, shutil) for every command
    p = sub.add_parser("exec-stage", help="(internal) the stage shim the daemon starts")
    p.add_argument("--run", required=True, type=names.argtype("run"))
    p.add_argument("--stage", required=True, type=names.argtype("stage"))
    p.add_argument("--attempt", required=True, type=int)
    p.set_defaults(func=cmd_exec_stage)


def _home(args: Any) -> Home:
    return Home.from_env(getattr(args, "home", None))


def cmd_exec_stage(args: Any) -> int:
    from boxagent.engine.shim import run_shim
    return run_shim(_home(args), args.run, args.stage, args.attempt)


def cmd_start(args: Any) -> int:
    from boxagent.daemon import control
    pid, fresh = control.start(_home(args), Roots.from_env(), args.timeout, args.resume_interrupted)
    if not fresh:
        sys.stderr.write("rgt agent already running\n")
    print(pid)
    return EXIT_OK


def cmd_daemon(args: Any) -> int:
    from boxagent.daemon.loop import Daemon
    return Daemon(_home(args), Roots.from_env(), resume_interrupted=args.resume_interrupted).run()


def cmd_stop(args: Any) -> int:
    from boxagent.daemon import control
    pid = control.stop(_home(args), Roots.from_env(), args.timeout, kill=args.kill)
    if pid is None:
        sys.stderr.write("rgt agent was not running\n")
    elif args.kill:
        sys.stderr.write("rgt agent stopped (pid %s) after ending every running stage\n" % pid)
    else:
        sys.stderr.write("rgt agent stopped (pid %s); running stages, if any, keep running\n" % pid)
    return EXIT_OK


def cmd_configure(args: Any) -> int:
    from boxagent.daemon import control
    path = control.configure(_home(args), sys.stdin.read())
    sys.stderr.write("config written to %s\n" % path)
    return EXIT_OK


def cmd_submit(args: Any) -> int:
    from boxagent.daemon import runverbs
    from boxagent.base import procs
    home, roots = _home(args), Roots.from_env()
    result = runverbs.submit(home, runverbs.read_job_text(args.file), args.file if args.file != "-" else "stdin",
                            replace=args.replace)
    if args.json:
        import json
        print(json.dumps(result))
    elif result.get("group"):
        runs = result["runs"]
        fresh = [r["run"] for r in runs if not r["duplicate"]]
        print("sweep %s: %d run(s) queued%s" % (result["group"], len(fresh),
                                                 " (%s .. %s)" % (fresh[0], fresh[-1]) if fresh else ""))
        if len(fresh) < len(runs):
            print("  %d identical run(s) already submitted: nothing to do for them" % (len(runs) - len(fresh)))
    elif result["duplicate"]:
        print("run %s: the identical job is already submitted (state: %s); nothing to do" % (result["run"], result["state"]))
        if result["state"] in ("failed", "cancelled", "interrupted"):
            sys.stderr.write("Hint: resume it with `rgt-agent resume %s`\n" % result["run"])
    else:
        print("run %s queued" % result["run"])
    waiting = result["state"] in ("queued", "running")   # a finished duplicate starts nothing
    if waiting and procs.daemon_pid(home.pidfile, roots) is None:   # = status.daemon_pid
        sys.stderr.write("Note: the daemon is not running; the run starts when it does (`rgt-agent start`)\n")
    return EXIT_OK


def cmd_cancel(args: Any) -> int:
    from boxagent.daemon import runverbs
    home, roots = _home(args), Roots.from_env()
    text, code = runverbs.cancel(home, roots, args.run, args.wait, args.kind)
    print(text)
    return code


def cmd_resume(args: Any) -> int:
    from boxagent.daemon import runverbs
    home, roots = _home(args), Roots.from_env()
    text, code = runverbs.resume(home, roots, args.run)
    print(text)
    return code


def cmd_status(args: Any) -> int:
    from boxagent.wire import status as status_mod
    home, roots = _home(args), Roots.from_env()
    n_events = status_mod.STATUS_EVENTS if args.events is None else args.events
    status = status_mod.read(home, roots, n_events=max(0, n_events))
    if args.run or args.all_runs:
        status_mod.add_older(status, home, args.run or None)
    if args.run:
        runs = [r for r in status.get("runs") or [] if r.get("name") == args.run]
        if not runs:
            names = [str(r.get("name")) for r in status.get("runs") or []]
            raise UsageError("no run named %r on this box" % args.run,
                             ("runs here: %s%s" % (", ".join(names[-20:]), " (and %d older)" % (len(names) - 20)
                                                   if len(names) > 20 else "")) if names else
                             "there are no runs on this box yet")
        status["runs"] = runs
    if args.json:
        sys.stdout.write(quickjson.dumps(status) + "\n")
    else:
        from boxagent.wire.status_text import render_text
        sys.stdout.write(render_text(status))
    return EXIT_OK if status["agent"]["running"] else EXIT_NOT_RUNNING


def cmd_logs(args: Any) -> int:
    from boxagent.daemon import reading
    sys.stdout.write(reading.logs(_home(args), args.run, args.stage, args.n, args.attempt))
    return EXIT_OK


def cmd_handbook(args: Any) -> int:
    from boxagent.daemon import reading
    sys.stdout.write(reading.handbook_text(_home(args), args.run))
    return EXIT_OK


def cmd_version(args: Any) -> int:
    from boxagent.daemon import control
    info = control.version_info()
    if args.json:
        import json
        print(json.dumps(info))
    else:
        print("rgt-agent %s (python %s, build sha256 %s)" % (info["version"], info["python"],
                                                            info["build_sha256"] or "none: source tree"))
    return EXIT_OK
