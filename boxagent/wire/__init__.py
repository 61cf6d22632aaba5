"""What crosses to the client: status.json, events.jsonl, exit codes and the Error/Hint format."""
