"""The run log: each run's history on the box (a point per sampling interval, thinned as it
ages; every logged metric value; every event), and the one JSON document `rgt-client report`
renders from it."""
