"""Platform profiles: find, load and validate `profiles/*.toml`, guess the platform
from a box's probe, and write the texts that warn before a verb costs data.

Plain functions; `profiles_cmd.py` renders them for the CLI. The schema is documented in
docs/profile-schema.md and enforced here: unknown keys and wrong types are refused with the
exact path of the problem (`profiles/x.toml: teardown[0].irreversible: expected true or false`).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from rgt_client import exitcodes
from rgt_client.errors import ClientError
from rgt_client.profiles.schema import KINDS, SCHEMA_DOC, SEVERITIES, duration_s, humanize_duration, validate

__all__ = ["KINDS", "SEVERITIES", "FALLBACK", "profiles_dir", "list_profiles", "load_profile",
           "load_all", "validate", "duration_s", "detect", "first_contact", "teardown_gate",
           "checkpoint_advice"]

FALLBACK = "generic-ssh"

_PKG = Path(__file__).resolve().parent.parent   # the rgt_client package


# -- where the shipped profiles live ---------------------------------------------------------

def profiles_dir() -> Path:
    """The folder of shipped profiles: $RGT_PROFILES_DIR, else the copy a wheel carries
    (rgt_client/_profiles), else the repository's profiles/ (editable install, source tree)."""
    env = os.environ.get("RGT_PROFILES_DIR")
    if env:
        return Path(env)
    for cand in (_PKG / "_profiles", _PKG.parent / "profiles"):
        if cand.is_dir() and any(cand.glob("*.toml")):
            return cand
    return _PKG.parent / "profiles"


def list_profiles() -> List[str]:
    """Names of the shipped profiles, sorted."""
    d = profiles_dir()
    return sorted(p.stem for p in d.glob("*.toml")) if d.is_dir() else []


def _resolve(name_or_path: str) -> Tuple[Path, str, str]:
    """-> (file, display path for messages, profile name)."""
    looks_like_path = "/" in name_or_path or os.sep in name_or_path or name_or_path.endswith(".toml")
    if looks_like_path:
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise ClientError("no profile file at %s" % name_or_path,
                              "name a shipped profile (rgt-client profiles) or an existing .toml file",
                              exitcodes.USAGE)
        return path, name_or_path, path.stem
    if name_or_path not in list_profiles():
        raise ClientError("unknown profile %r" % name_or_path,
                          "known: %s; or name your own file, e.g. ./myhost.toml"
                          % ", ".join(list_profiles()), exitcodes.USAGE)
    return profiles_dir() / (name_or_path + ".toml"), "profiles/%s.toml" % name_or_path, name_or_path


def load_profile(name_or_path: str) -> Dict[str, Any]:
    """Load and validate a profile by shipped name or by file path; the dict gets "name"."""
    path, display, stem = _resolve(name_or_path)
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ClientError("%s: not valid TOML: %s" % (display, exc),
                          "see %s for the format" % SCHEMA_DOC) from None
    except OSError as exc:
        raise ClientError("%s: cannot read: %s" % (display, exc.strerror or exc)) from None
    validate(data, display)
    if "name" not in data:
        data["name"] = stem
    elif display.startswith("profiles/") and data["name"] != stem:
        raise ClientError('%s: name: expected "%s" (the file name)' % (display, stem))
    return data


def load_all() -> Dict[str, Dict[str, Any]]:
    return {n: load_profile(n) for n in list_profiles()}


# -- detection from a box's probe --------------------------------------------------------------

def _facts(probe: Dict[str, Any]) -> Tuple[set, set]:
    """(existing paths, set env names) from `rgt-agent probe --json` (its "platform_facts"
    block, made by boxagent.base.profile.detect_facts) or a bare {"paths": .., "env": ..} dict."""
    facts = probe.get("platform_facts", probe) if isinstance(probe, dict) else {}
    facts = facts if isinstance(facts, dict) else {}
    raw_paths = facts.get("paths") or {}
    if isinstance(raw_paths, dict):
        paths = {p for p, ok in raw_paths.items() if ok}
    else:
        paths = {p for p in raw_paths if isinstance(p, str)}
    raw_env = facts.get("env") or {}
    if isinstance(raw_env, dict):
        env = {n for n, v in raw_env.items() if v is not None and v is not False}
    else:
        env = {n for n in raw_env if isinstance(n, str)}
    return paths, env


def _env_hits(patterns: List[str], env: set) -> List[str]:
    hits = []
    for pat in patterns:
        if pat.endswith("*"):
            hits += sorted(n for n in env if n.startswith(pat[:-1]))
        elif pat in env:
            hits.append(pat)
    return hits


def _score(prof: Dict[str, Any], paths: set, env: set) -> Optional[Tuple[tuple, str]]:
    d = prof.get("detect") or {}
    env_hits = _env_hits(d.get("env", []), env)
    path_hits = [p for p in d.get("paths", []) if p in paths]
    weak_hits = [p for p in d.get("weak_paths", []) if p in paths]
    # Paths alone must reach min_paths: /storage or /workspace exist on many unrelated boxes.
    if not env_hits and len(path_hits) < d.get("min_paths", 1):
        return None
    said = ["$%s is set" % n for n in env_hits] + ["%s exists" % p for p in path_hits + weak_hits]
    key = (bool(env_hits), len(env_hits) + len(path_hits), len(weak_hits), d.get("priority", 0))
    return key, ", ".join(said)


def detect(probe: Dict[str, Any],
           profiles: Optional[Dict[str, Dict[str, Any]]] = None) -> Tuple[str, str]:
    """Guess the platform from a probe: -> (profile name, why). Falls back to generic-ssh."""
    profiles = load_all() if profiles is None else profiles
    paths, env = _facts(probe)
    scored = []
    for name, prof in profiles.items():
        got = _score(prof, paths, env)
        if got:
            scored.append((got[0], name, got[1]))
    if not scored:
        looked = sum(len((p.get("detect") or {}).get("paths", [])) for p in profiles.values())
        return FALLBACK, ("no platform marker found (checked %d paths and the platform variables); "
                          "generic-ssh assumes nothing on the box survives a stop" % looked)
    scored.sort(key=lambda t: t[0], reverse=True)
    _key_, best, why = scored[0]
    others = [n for _k, n, _w in scored[1:]]
    reason = "%s (%s)" % (why, profiles[best].get("platform", best))
    if others:
        reason += "; also looked like %s — pass --profile to choose" % ", ".join(others)
    return best, reason


# -- texts: first contact and the teardown gate ----------------------------------------------

def _trust(profile: Dict[str, Any]) -> str:
    source = profile.get("provenance", "unknown source")
    if profile.get("verified"):
        return "facts verified on the platform: %s" % source
    return "facts NOT verified on the platform; source: %s" % source


def _verb_line(t: Dict[str, Any]) -> str:
    if not t.get("stops_billing"):
        billing = "does NOT stop billing"
    else:
        billing = "stops compute billing, storage still bills" if t.get("still_bills") else "stops billing"
    parts = [billing,
             "IRREVERSIBLE" if t.get("irreversible") else "reversible"]
    destroys = t.get("destroys") or []
    parts.append("destroys " + ", ".join(destroys) if destroys else "destroys nothing")
    line = "%s: %s" % (t.get("name"), "; ".join(parts))
    for still in t.get("still_bills") or []:
        line += "\n      still bills: %s" % still
    if t.get("note"):
        line += "\n      note: %s" % t["note"]
    return line


def _clock_lines(profile: Dict[str, Any]) -> List[str]:
    return ["  DANGER after %s: %s" % (humanize_duration(c["after"]), c["what"])
            for c in profile.get("danger_clock") or []]


def checkpoint_advice(profile: Dict[str, Any]) -> str:
    """Where to keep checkpoints: a tier that survives every verb, else one that survives stop."""
    rows = profile.get("survival") or []
    keep = [r for r in rows if r.get("survives_destroy")]
    if keep:
        return "keep checkpoints in %s (survives every teardown verb)" % " or ".join(
            "%s [%s]" % (r["path"], r["tier"]) for r in keep)
    keep = [r for r in rows if r.get("survives_stop")]
    if keep:
        return ("keep checkpoints in %s (survives a stop, NOT the final verb): pull results "
                "before you tear down" % " or ".join("%s [%s]" % (r["path"], r["tier"]) for r in keep))
    return "nothing on this box is known to survive: pull results (rgt-client pull) before you stop it"


def first_contact(profile: Dict[str, Any]) -> str:
    """The block `install` prints: danger clocks, what each stop verb destroys, where to keep
    checkpoints."""
    name = profile.get("name", "?")
    lines = ["Profile %s: %s (%s; %s)" % (name, profile.get("platform", name),
                                          profile.get("kind", "?"), _trust(profile))]
    if profile.get("summary"):
        lines.append("  " + profile["summary"])
    lines += _clock_lines(profile)
    verbs = profile.get("teardown") or []
    if verbs:
        lines.append("  Stop verbs:")
        lines += ["    " + _verb_line(t) for t in verbs]
    lines.append("  Checkpoints: " + checkpoint_advice(profile))
    ssh_note = (profile.get("ssh") or {}).get("note")
    if ssh_note:
        lines.append("  SSH: " + ssh_note)
    return "\n".join(lines)


def teardown_gate(profile: Dict[str, Any], verified: bool, why: Optional[str] = None) -> str:
    """What `verify` says last: only a verified pull is "safe to tear down", and it names the
    profile's verbs, what they destroy and what keeps billing."""
    platform = profile.get("platform", profile.get("name", "this box"))
    verbs = profile.get("teardown") or []
    if not verbs:
        return "Nothing to tear down on %s." % platform
    if not verified:
        final = [t for t in verbs if t.get("irreversible")] or verbs
        lines = ["NOT safe to tear down: %s." % (why or "the pull is not verified")]
        for t in final:
            lines.append("  Do not %s yet: it destroys %s." % (
                t["name"], ", ".join(t.get("destroys") or []) or "data you may still need"))
        lines.append("  Run `rgt-client pull` again, then `rgt-client verify`.")
        return "\n".join(lines)
    lines = ["Safe to tear down %s: the local copy matches the box's manifest." % platform]
    lines.append("  On %s (%s):" % (platform, _trust(profile)))
    lines += ["    " + _verb_line(t) for t in verbs]
    lines += _clock_lines(profile)
    lines.append("  rgt never stops, releases or destroys anything: the verb is yours to run.")
    return "\n".join(lines)
