"""Hydra sweeper plugin of smartvector-bench (``hydra/sweeper=check_first``)."""
