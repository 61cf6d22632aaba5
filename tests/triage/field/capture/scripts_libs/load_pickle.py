"""Reload the replay buffer on resume."""
import pickle

print("loading replay buffer replay.pkl", flush=True)
with open("replay.pkl", "rb") as fh:
    buf = pickle.load(fh)
print(len(buf))
