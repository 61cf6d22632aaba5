"""Resume from weights.h5 the way a training script does."""
import h5py

print("resuming from weights.h5", flush=True)
with h5py.File("weights.h5", "r") as f:
    print(list(f.keys()))
