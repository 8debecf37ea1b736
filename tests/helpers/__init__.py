"""Helpers shared by the tests (no tests here): fixture paths, the one row canonicaliser, readers the
project did not write, Delta histories written by Delta Spark, Dagster harness, log-replay checks."""
