"""Torch tests: a Python with torch (CPU) and tqdm, found or made once per session
(tests/torchenv.py). A test marked `torch` skips with the reason when none is to be had; the
first one to ask may wait about a minute while the cached venv is made."""
from __future__ import annotations

import pytest

from tests import torchenv


@pytest.fixture(scope="session")
def torch_python() -> str:
    python, why = torchenv.torch_python()
    if python is None:
        pytest.skip(why)
    return python


@pytest.fixture(autouse=True)
def _torch_marker(request):
    """`@pytest.mark.torch` alone is enough: the test skips when torch cannot be had."""
    if request.node.get_closest_marker("torch") is not None:
        request.getfixturevalue("torch_python")
