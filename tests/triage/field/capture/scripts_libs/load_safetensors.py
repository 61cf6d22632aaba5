"""Load a safetensors shard the way a model loader does."""
from safetensors.numpy import load_file

print("Loading checkpoint shards: model-00001-of-00002.safetensors", flush=True)
state = load_file("model-00001-of-00002.safetensors")
print(len(state), "tensors")
