"""Fetch a weights file over HTTP with requests from a server that is not listening."""
import requests

print("downloading http://127.0.0.1:9/models/resnet50.pth", flush=True)
r = requests.get("http://127.0.0.1:9/models/resnet50.pth", timeout=10)
r.raise_for_status()
