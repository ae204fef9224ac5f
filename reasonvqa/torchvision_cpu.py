"""Test-machine workaround: torchvision's CUDA build next to a CPU torch (the test and benchmark machines
install the CPU torch wheel; the torchvision wheel they get is built for CUDA).

There, torchvision's compiled library ``_C.so`` does not load, and ``import torchvision`` (and with
it transformers, groundingdino, segment_anything) fails with ``operator torchvision::nms does not
exist``. Why: ``_C.so`` holds torchvision's CPU *and* CUDA kernels and is linked against
``libc10_cuda.so`` and ``libtorch_cuda.so``, which only the CUDA torch wheels ship (the CUDA runtime
``libcudart.so.13`` itself is found on these machines). Its CUDA code paths need 16 functions of
those two libraries (``c10::cuda::*``, ``at::cuda::*``), called only for CUDA tensors.

``prepare`` therefore, before torchvision is imported:

1. compiles two stub libraries with those sonames that define exactly the missing ``c10::cuda`` /
   ``at::cuda`` symbols (each traps if ever called), loads them globally, then loads ``_C.so``:
   torchvision then runs on its own compiled CPU kernels (``nms``, ``roi_align``, ...), so tests
   can compare against the real ``torchvision.ops``. This needs ``gcc`` and ``nm`` and a loadable
   ``libcudart.so.13``; it is tried in a subprocess first, so a crash cannot take the test run down;
2. otherwise registers pure-PyTorch CPU ``torchvision::nms``/``qnms`` kernels, so torchvision's
   Python code and models load (and comparisons against torchvision's kernels are skipped).

Only the test suite and the benchmarks call this (it lives here so neither imports the other); product code never does (on a GPU machine the
matching CUDA pair works as shipped).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_STATE: dict[str, object] = {"real_ops": None}


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


def _compiled_library() -> Path | None:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent
    libraries = sorted(folder.glob("_C*.so"))
    return libraries[0] if libraries else None


def _compiled_library_loads(torch) -> bool:
    library = _compiled_library()
    if library is None:
        return False
    try:
        torch.ops.load_library(str(library))
    except (OSError, RuntimeError):
        return False
    return True


_CUDA_ONLY_LIBRARIES = ("libc10_cuda.so", "libtorch_cuda.so")
_CUDA_SYMBOL_PREFIXES = ("_ZN3c104cuda", "_ZNK3c104cuda", "_ZN2at4cuda", "_ZNK2at4cuda")


def _build_stubs(library: Path) -> Path | None:
    """Stub ``libc10_cuda.so`` / ``libtorch_cuda.so`` for ``library``'s missing CUDA symbols; their folder, or None."""
    if not (shutil.which("gcc") and shutil.which("nm")):
        return None
    folder = Path(tempfile.gettempdir()) / f"reasonvqa-torchvision-stubs-{os.getuid()}-{library.stat().st_size}"
    if all((folder / name).is_file() for name in _CUDA_ONLY_LIBRARIES):
        return folder
    listed = subprocess.run(["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True)
    symbols = sorted({line.split()[-1] for line in listed.stdout.splitlines()
                      if line.split() and line.split()[-1].startswith(_CUDA_SYMBOL_PREFIXES)})
    if listed.returncode != 0 or not symbols:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / f"stub-{os.getpid()}.c"  # per process: parallel test workers may build at once
    source.write_text("".join(f'void stub_{i}(void) __asm__("{name}");\nvoid stub_{i}(void) {{ __builtin_trap(); }}\n'
                              for i, name in enumerate(symbols)))
    for name in _CUDA_ONLY_LIBRARIES:
        partial = folder / f"{name}.{os.getpid()}.tmp"
        built = subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(partial), f"-Wl,-soname,{name}", str(source)],
                               capture_output=True)
        if built.returncode != 0:
            return None
        os.replace(partial, folder / name)
    source.unlink()
    return folder


_PROBE = """
import ctypes, sys, torch
for path in sys.argv[2:]:
    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
torch.ops.load_library(sys.argv[1])
boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], dtype=torch.float64)
keep = torch.ops.torchvision.nms(boxes, torch.tensor([0.9, 0.8, 0.7], dtype=torch.float64), 0.5)
assert keep.tolist() == [0, 2], keep
"""


def _load_with_stubs(torch) -> bool:
    """Load torchvision's compiled kernels next to stub CUDA-only libraries (see the module docstring)."""
    library = _compiled_library()
    folder = _build_stubs(library) if library is not None else None
    if folder is None:
        return False
    stubs = [str(folder / name) for name in _CUDA_ONLY_LIBRARIES]
    probed = folder / f"probe-ok-torch-{torch.__version__}"  # a load that worked once works again: skip the probe
    if not probed.exists():
        probe = subprocess.run([sys.executable, "-c", _PROBE, str(library), *stubs], capture_output=True, timeout=300)
        if probe.returncode != 0:
            return False
        probed.touch()
    for path in stubs:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    torch.ops.load_library(str(library))
    return True


def prepare() -> None:
    """Make ``import torchvision`` work on this machine; a no-op without torchvision or when it loads."""
    if _STATE["real_ops"] is not None:
        return
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("torchvision") is None:
        _STATE["real_ops"] = False
        return
    import torch

    if _compiled_library_loads(torch) or _load_with_stubs(torch):
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
