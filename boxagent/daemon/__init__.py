"""The daemon: its loop, its wakeups, the parts on its bus, and the commands that start, stop and drive it."""
