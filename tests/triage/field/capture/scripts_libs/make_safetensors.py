"""Write a safetensors shard (the capture truncates it afterwards)."""
import numpy as np
from safetensors.numpy import save_file

save_file({"model.layers.%d.weight" % i: np.random.rand(512, 512).astype("float32")
           for i in range(4)}, "model-00001-of-00002.safetensors")
