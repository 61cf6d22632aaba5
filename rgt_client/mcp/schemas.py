"""The tools' output schemas (published as outputSchema, and checked by the SDK on every result).

total=False: a field the box did not send is absent, never a made-up default.
"""
from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict   # pydantic needs it for nested TypedDicts before 3.12


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


class HostsOut(TypedDict):
    hosts: list[dict[str, Any]]
    read_only: bool


class StatusOut(TypedDict, total=False):
    host: str
    observed_at: str
    profile: str
    agent: dict[str, Any]
    runs: list[RunOut]
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


class WaitOut(TypedDict, total=False):
    host: str
    run: str
    timed_out: bool
    events: list[EventOut]
    more: bool
    cursor: str
    waited_s: float
    summary: StatusOut
    note: str
    next: str


class SubmitOut(TypedDict, total=False):
    host: str
    run: str
    state: str
    duplicate: bool
    runs: list[dict[str, Any]]
    notes: list[str]
    cursor: str
    next: str


class VerbOut(TypedDict, total=False):
    host: str
    run: str
    done: bool
    text: str
    state: str
    next: str


class InstallOut(TypedDict, total=False):
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


class LogsOut(TypedDict, total=False):
    host: str
    run: str
    stage: str
    lines: list[LogLine]
    shown: int
    matched: int
    cut: bool
    note: str


class DiagnoseOut(TypedDict, total=False):
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


class PullOut(TypedDict, total=False):
    host: str
    run: str
    dest: str
    verified: bool
    files: int
    bytes: int
    problems: list[dict[str, Any]]
    safe_to_tear_down: bool
    teardown: str
    bytes_moved: int
    elapsed_s: float
    next: str


class ReportOut(TypedDict):
    host: str
    run: str
    path: str
    next: str


class PlatformOut(TypedDict, total=False):
    profile: str
    platform: str
    verified: bool
    teardown: list[dict[str, Any]]
    danger_clock: list[dict[str, Any]]
    checkpoints: str
    text: str
    profiles: list[str]
