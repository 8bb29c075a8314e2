"""Tests of the pure route table (raftstore)."""
