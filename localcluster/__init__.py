"""Local-cluster tooling: the launcher, broker control and the demo fleet."""
