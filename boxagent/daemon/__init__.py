"""The daemon: its loop, the inbox requests reach it through, wakeups, and the commands that drive it."""
