"""Write a small Keras-style weights file with h5py (the capture truncates it afterwards)."""
import h5py
import numpy as np

with h5py.File("weights.h5", "w") as f:
    for i in range(4):
        f.create_dataset("layer_%d/kernel" % i, data=np.random.rand(256, 256).astype("float32"))
