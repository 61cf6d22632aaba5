"""What the box costs: install's cost flags and the cost lines of status and patrol."""
