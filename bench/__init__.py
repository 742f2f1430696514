"""tenure's benchmark: ``python bench/run.py`` (see docs/benchmarks.md)."""
