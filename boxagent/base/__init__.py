"""Small utilities every part stands on: errors and exit codes, files, units, the /proc seam, processes, the box layout, config, profile, the Part interface."""
