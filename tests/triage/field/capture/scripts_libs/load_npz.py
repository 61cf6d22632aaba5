"""Load the optimizer state on resume."""
import numpy as np

print("restoring optimizer_state.npz", flush=True)
state = np.load("optimizer_state.npz")
print(state["m"].shape)
