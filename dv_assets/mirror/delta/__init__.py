"""Reading a Delta table's log without Spark: log files and their reading (log_files.py, log.py,
checkpoint_columns.py), actions, paths, protocol checks, and the replay that turns them into table states
and version changes (replay.py). Import the modules; the package itself exports nothing, so importing
one of them never loads the others."""
