"""What crosses between the agent's processes and to the client: status.json, events.jsonl, and the inbox of requests to the daemon."""
