"""The connection layer: the ssh transport, calls to the agent and what they answer, the agent's build."""
