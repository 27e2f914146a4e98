"""Hydra sweeper plugins of smartvector-bench: ``hydra/sweeper=check_first`` (one study's
sweep, composing only its first job up front) and ``hydra/sweeper=studies`` (several
studies' sweeps launched as one)."""
