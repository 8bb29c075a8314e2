"""Management commands of broker_app."""
