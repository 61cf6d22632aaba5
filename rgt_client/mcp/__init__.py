"""`rgt-client mcp`: rgt as a Model Context Protocol server for AI coding agents (docs/agents.md).

calls.py is the one seam into the rest of the client; safety.py owns the allow-list and what a
model may read back; wait.py and boxread.py are the box-side reads; tools_read.py and
tools_act.py the tools; server.py assembles them; cmd.py is the click command. Only results.py,
the tools and server.py import the SDK (the `mcp` extra)."""
