"""The run engine: runs, stages and attempts; the job spec; the stage shim."""
