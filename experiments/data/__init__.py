"""Datasets: the harness's format and validating loader, the registry of named datasets and
their generators (every module here that defines a ``DATASET`` is one)."""
