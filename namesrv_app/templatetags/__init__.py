"""Template filters of the console."""
