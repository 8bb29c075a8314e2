"""The broker Django app: broker processes that register with the NameServers."""
