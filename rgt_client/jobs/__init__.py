"""`run`, `attach`, `cancel`, `resume`, `handbook`, `logs`: a job file, its submission and its runs' logs."""
