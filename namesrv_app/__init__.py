"""The NameServer Django app: projection models, services, selectors and the gateway."""
