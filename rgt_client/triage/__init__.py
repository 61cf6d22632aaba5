"""`triage`: diagnose a log file on this machine, offline."""
