"""rgt-client: the thin local side of rgt."""
__version__ = "0.1.0"
