"""Scale and speed benchmarks of the SmartVector library (issue 6).

One command each, from the repository root::

    python -m benchmarks.bench_query          # four-signal retrieval vs plain hnswlib vs the PoC
    python -m benchmarks.bench_filtering      # large pools: in-search filtering, partitioned index
    python -m benchmarks.bench_consolidation  # one consolidation pass at 10^4..10^6 vectors
    python -m benchmarks.bench_updates        # surgical updates vs full re-indexing
    python -m benchmarks.bench_memory         # bytes per stored vector beyond the embedding

Each prints its figures and writes ``results/benchmarks/<name>.json``; ``python -m
benchmarks.summary`` rebuilds ``results/benchmarks/README.md`` from those files.
"""
