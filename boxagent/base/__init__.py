"""Small utilities every part stands on: files, units, the /proc seam, processes, the box layout, config, profile."""
