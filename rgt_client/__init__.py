"""rgt-client: the thin local side of rgt."""
__version__ = "0.1.0"
# The distribution's name on the package index (pyproject.toml): `rgt` there is someone else's.
DISTRIBUTION = "rgt-gpu"
