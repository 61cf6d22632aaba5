"""Save optimizer state with numpy (the capture truncates it afterwards)."""
import numpy as np

np.savez("optimizer_state.npz", m=np.random.rand(1 << 18), v=np.random.rand(1 << 18))
