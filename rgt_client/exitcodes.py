"""rgt-client exit codes: one place, documented in the README."""
OK = 0
ERROR = 1
USAGE = 2
AGENT_DOWN = 3        # agent not running, or its heartbeat is stale
RUN_FAILED = 4        # a run failed (or verify found a mismatch)
UNREACHABLE = 5       # ssh could not reach the host
GAVE_UP = 6           # watch: gave up waiting
STATE_FULL = 7        # patrol: the agent's state dir is full (runs go on, no new stage starts)
HOST_KEY = 8           # ssh: the box's host key is unknown here (first contact) or changed
AUTH_FAILED = 9        # ssh: the box refused the login (no agent under cron, wrong key)
