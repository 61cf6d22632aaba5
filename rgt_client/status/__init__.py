"""`status`, `watch`, `patrol`: read a box's status.json, check it, and render it as text."""
