"""The run log: each run's history on the box (one point a minute + every event), and the one
JSON document `rgt-client report` renders from it."""
