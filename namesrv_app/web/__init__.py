"""The console: server-rendered pages over the projection; writes through the gateway."""
