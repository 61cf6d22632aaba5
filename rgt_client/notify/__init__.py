"""`notify-set`, `notify-test`: the box's notification settings."""
