"""Test-machine workaround: torchvision's CUDA build next to a CPU torch (FIELD_NOTES, section 1).

There, torchvision's compiled library does not load and ``import torchvision`` (and with it
transformers, groundingdino, segment_anything) fails with ``operator torchvision::nms does not
exist``. ``prepare`` registers pure-PyTorch CPU ``torchvision::nms``/``qnms`` kernels before
torchvision is imported, so its Python code and models load. Only the test suite calls this;
product code never does (on a GPU machine the matching CUDA pair works as shipped).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_STATE: dict[str, bool | None] = {"real_ops": None}


def real_ops_loaded() -> bool:
    """True when torchvision runs on its own compiled kernels (checked by ``prepare``)."""
    prepare()
    return bool(_STATE["real_ops"])


def _cpu_nms(dets, scores, iou_threshold: float):
    import torch

    if dets.numel() == 0:
        return torch.empty(0, dtype=torch.long, device=dets.device)
    order = torch.sort(scores, stable=True, descending=True).indices
    x1, y1, x2, y2 = dets.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    keep = []
    while order.numel():
        i = order[0]
        keep.append(i)
        rest = order[1:]
        w = (torch.minimum(x2[i], x2[rest]) - torch.maximum(x1[i], x1[rest])).clamp(min=0)
        h = (torch.minimum(y2[i], y2[rest]) - torch.maximum(y1[i], y1[rest])).clamp(min=0)
        inter = w * h
        order = rest[~(inter / (areas[i] + areas[rest] - inter) > iou_threshold)]
    return torch.stack(keep)


def _compiled_library_loads(torch) -> bool:
    spec = importlib.util.find_spec("torchvision")
    folder = Path(spec.origin).parent
    libraries = sorted(folder.glob("_C*.so"))
    if not libraries:
        return False
    try:
        torch.ops.load_library(str(libraries[0]))
    except (OSError, RuntimeError):
        return False
    return True


def prepare() -> None:
    """Make ``import torchvision`` work on this machine; a no-op without torchvision or when it loads."""
    if _STATE["real_ops"] is not None:
        return
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("torchvision") is None:
        _STATE["real_ops"] = False
        return
    import torch

    if _compiled_library_loads(torch):
        _STATE["real_ops"] = True
        return
    library = torch.library.Library("torchvision", "FRAGMENT")
    library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    library.impl("nms", _cpu_nms, "CPU")
    _STATE["library"] = library  # keep the registration alive
    import torchvision.extension

    torchvision.extension._has_ops = lambda: True
    _STATE["real_ops"] = False
