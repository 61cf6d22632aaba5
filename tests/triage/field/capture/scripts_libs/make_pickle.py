"""Pickle a replay buffer (the capture truncates it afterwards)."""
import pickle

with open("replay.pkl", "wb") as fh:
    pickle.dump([{"obs": list(range(64)), "reward": i * 0.5} for i in range(20000)], fh)
