"""What the tests and the benchmarks both build on: hand-written Delta tables (`synthetic.py`)."""
