"""The NameServer node process without Django: wire dispatch, the one write path, route answers."""
