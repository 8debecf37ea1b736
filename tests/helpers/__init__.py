"""Helpers shared by the tests (no tests here; test_*.py files hold only tests and their fixtures):
fixture paths and facts (paths), the one row canonicaliser (rows), readers the project did not write
(readers), hand-written Delta logs and synthetic tables, also the benchmarks' (delta_log), Delta histories
written by Delta Spark (delta_histories), DVs (dvs), schemas and stats (schemas), damaged input and
injected faults (faults), the dvmirror CLI runner and other processes (processes), the Dagster harness
(dagster)."""
