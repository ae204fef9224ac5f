"""Benchmarks: scripts run as `python -m benchmarks.<name>`; results go to BENCHMARKS.md."""
