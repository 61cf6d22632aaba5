"""rgt box agent: runs on the rented box with the Python >= 3.8 standard library only."""
__version__ = "0.1.0"
