"""`pull`, `verify`: copy exactly a run's manifest to this machine and check it."""
