"""Tests of the files under deploy/ (alerting rules, the Grafana dashboard)."""
