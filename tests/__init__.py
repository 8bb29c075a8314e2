"""The project test suite."""
