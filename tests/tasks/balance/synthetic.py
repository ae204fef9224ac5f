"""The synthetic question pools of ``tasks/balance/synthetic.py`` (shared with the benchmarks)."""

from reasonvqa.tasks.balance.synthetic import DOMAINS, synthetic_pool

__all__ = ["DOMAINS", "synthetic_pool"]
