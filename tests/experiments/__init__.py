"""Tests of the real-cluster experiment runner (spark_jobs.experiment)."""
