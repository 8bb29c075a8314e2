"""Management commands of the NameServer app."""
