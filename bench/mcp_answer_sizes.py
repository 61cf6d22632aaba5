"""The bytes a model reads from rgt's MCP server on a box with 1,000 active runs.

    PYTHONPATH=. python bench/mcp_answer_sizes.py        # this checkout's server

Drives a real `rgt-client mcp` with the MCP SDK's client against a compromised-agent stand-in
(tests/hostile.py) reached as `local`, whose status lists 1,000 runs, and prints the size of
get_status, the status resource and a timed-out wait_for_change (the JSON text the model
reads). Run it once with PYTHONPATH pointing at another checkout to compare two versions.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.mcp.trustworld import SharedServer, World, answer_size, thousand_runs, write_events  # noqa: E402


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="rgt-sizes-") as d:
        world = World(Path(d))
        world.box.answer("status", stdout=thousand_runs())
        write_events(world.box.home, [{"id": "1700000000000-aaaaaa-1", "type": "daemon_started"}])
        server = SharedServer(world.env)
        try:
            status = server.call("get_status", host="local")
            resource = server.read_resource("rgt://status/local")
            wait = server.call("wait_for_change", host="local", cursor="1700000000000-aaaaaa-1", timeout_s=1)
        finally:
            server.close()
    print(json.dumps({"runs": 1000, "get_status_bytes": answer_size(status),
                      "status_resource_bytes": len(resource.encode("utf-8")),
                      "timed_out_wait_bytes": answer_size(wait)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
