"""Allocate a feature matrix too large for the process's memory limit."""
import numpy as np

print("building the 60000 x 60000 similarity matrix", flush=True)
sim = np.ones((60000, 60000), dtype=np.float64)
print(sim.sum())
