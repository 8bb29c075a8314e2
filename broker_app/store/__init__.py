"""The broker's message store: segmented commit log, consume queues, recovery."""
