"""Artifacts: the run's manifest of declared outputs."""
from boxagent.artifacts.manifest import build_manifest, summary  # noqa: F401
