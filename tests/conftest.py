"""Suite-wide test setup."""

from tests.torchvision_cpu import prepare

# Before anything imports torchvision, transformers or segment_anything (see tests/torchvision_cpu.py).
prepare()
