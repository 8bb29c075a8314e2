"""Tests of the real-cluster experiment runner (experiments)."""
