"""Leasehold's benchmark suite: ``make bench`` (full) and ``make bench-quick`` (reduced).

``python -m bench.run`` measures throughput, latency, timing precision, AWS requests and
DynamoDB capacity units per job, cost, scaling and cold start, and writes
``bench/results.json`` and ``BENCHMARKS.md``.
"""
