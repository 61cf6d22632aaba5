"""The tools' output schemas (published as outputSchema, and checked by the SDK on every result).

total=False: a field the box did not send is absent, never a made-up default.
"""
from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict   # pydantic needs it for nested TypedDicts before 3.12


class Bounded(TypedDict, total=False):
    left_out: dict[str, Any]       # what the byte budget left out, and how to ask for it (budget.py)


class StageOut(TypedDict, total=False):
    name: str
    state: str
    attempt: int
    exit_code: int
    duration_s: float
    progress: dict[str, float]
    cause_class: str
    warnings: list[str]


class RunOut(TypedDict, total=False):
    name: str
    state: str
    current_stage: str
    failed_stage: str
    started_at: str
    ended_at: str
    stages: list[StageOut]
    cause: dict[str, Any]
    artifacts: dict[str, float]
    cost: dict[str, float]
    next: str


class HostsOut(Bounded, total=True):
    hosts: list[dict[str, Any]]
    read_only: bool


class StatusOut(Bounded, total=False):
    host: str
    observed_at: str
    profile: str
    agent: dict[str, Any]
    runs_by_state: dict[str, int]
    runs_total: int
    runs: list[RunOut]
    page: int
    pages: int
    more_runs: str
    alerts: list[dict[str, Any]]
    cost: dict[str, Any]
    cursor: str
    next: str


class EventOut(TypedDict, total=False):
    id: str
    at: str
    type: str
    severity: str
    run: str
    stage: str
    summary: str
    evidence: list[str]
    cause_class: str
    exit_code: int
    attempt: int
    duration_s: float
    failed_stage: str


class WaitOut(Bounded, total=False):
    host: str
    run: str
    timed_out: bool
    events: list[EventOut]
    more: bool
    cursor: str
    cursor_note: str
    waited_s: float
    summary: StatusOut
    note: str
    next: str


class SubmitOut(Bounded, total=False):
    host: str
    run: str
    state: str
    duplicate: bool
    runs: list[dict[str, Any]]
    notes: list[str]
    cursor: str
    next: str


class VerbOut(Bounded, total=False):
    host: str
    run: str
    done: bool
    text: str
    state: str
    next: str


class InstallOut(Bounded, total=False):
    host: str
    installed: bool
    sha256: str
    profile: str
    profile_reason: str
    warnings: list[str]
    next: str


class LogLine(TypedDict):
    stage: str
    text: str


class LogsOut(Bounded, total=False):
    host: str
    run: str
    stage: str
    lines: list[LogLine]
    shown: int
    matched: int
    cut: bool
    note: str


class DiagnoseOut(Bounded, total=False):
    host: str
    run: str
    state: str
    failed_stage: str
    cause: dict[str, Any]
    confidence: str
    artifacts_verified: bool
    artifacts_note: str
    evidence_bundle: dict[str, Any]
    next: str


class PullOut(Bounded, total=False):
    host: str
    run: str
    dest: str
    verified: bool
    files: int
    bytes: int
    problems: list[dict[str, Any]]
    symlinks_not_made: list[str]
    safe_to_tear_down: bool
    teardown: str
    bytes_moved: int
    elapsed_s: float
    next: str


class ReportOut(Bounded, total=True):
    host: str
    run: str
    path: str
    next: str


class PlatformOut(Bounded, total=False):
    profile: str
    platform: str
    verified: bool
    teardown: list[dict[str, Any]]
    danger_clock: list[dict[str, Any]]
    checkpoints: str
    text: str
    profiles: list[str]
