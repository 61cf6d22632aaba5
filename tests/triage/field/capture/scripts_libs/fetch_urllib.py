"""Fetch a dataset index over HTTP with the stdlib from a server that is not listening."""
import urllib.request

print("fetching dataset index", flush=True)
with urllib.request.urlopen("http://127.0.0.1:9/datasets/index.json", timeout=10) as resp:
    print(resp.read()[:100])
