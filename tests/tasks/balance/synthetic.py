"""The synthetic question pools of ``reasonvqa/synthetic.py`` (shared with the benchmarks)."""

from reasonvqa.synthetic import DOMAINS, synthetic_pool

__all__ = ["DOMAINS", "synthetic_pool"]
