"""`install`: bootstrap the agent on a box and say what it found."""
