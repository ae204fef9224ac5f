"""torchvision's compiled ops on a CPU torch: ``reasonvqa/torchvision_cpu.py`` (shared with the benchmarks)."""

from reasonvqa.torchvision_cpu import prepare, real_ops_loaded

__all__ = ["prepare", "real_ops_loaded"]
