"""What the tests and the benchmarks both build on: hand-written Delta tables (`synthetic.py`), a Spark
standalone cluster on loopback (`spark_cluster.py`)."""
