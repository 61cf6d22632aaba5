"""Trust-boundary tests: a compromised box (tests/hostile.py) against the real client."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile import hostile  # noqa: F401  (the fixture)


@pytest.fixture(autouse=True)
def _isolated_client(client_config) -> Path:
    """Every test here gets its own client config dir and no inherited RGT_HOME/RGT_SSH_CONFIG."""
    return client_config
