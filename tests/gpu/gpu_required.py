"""What the GPU test scripts share: how a check that cannot run ends.

Without a GPU a GPU check skips (exit 77, ctest's "skipped"), saying why. With
FOLIO_REQUIRE_GPU=1 (set by bench/gpu/gpu_check.sh, on the machine that has the GPU) the same
check fails instead: there, a skip would hide that nothing was tested.
"""

import os
import shutil
import subprocess
import sys

SKIPPED = 77


def required():
    return os.environ.get("FOLIO_REQUIRE_GPU") == "1"


def skip(reason):
    """Ends the script: skipped, or failed under FOLIO_REQUIRE_GPU=1."""
    if required():
        print(f"FAIL: {reason} (FOLIO_REQUIRE_GPU=1: a GPU check that cannot run fails)")
        sys.exit(1)
    print(f"SKIP: {reason}")
    sys.exit(SKIPPED)


def gpu_visible():
    """Whether the driver shows this process a GPU (nvidia-smi, and CUDA_VISIBLE_DEVICES)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    if shutil.which("nvidia-smi") is None:
        return False
    listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return listing.returncode == 0 and "GPU " in listing.stdout


def torch_with_cuda_or_end():
    """PyTorch, when it has CUDA. A GPU that is there while this Python's PyTorch cannot use it is
    a failure naming the fix, not a skip; no GPU at all is a skip."""
    fix = (f"run the GPU checks with a Python whose PyTorch 2.x is built for CUDA "
           f"(cmake -DFOLIO_GPU_PYTHON=..., or pip install torch for CUDA into {sys.executable})")
    try:
        import torch
    except ImportError:
        if gpu_visible():
            print(f"FAIL: a GPU is visible but {sys.executable} has no PyTorch: {fix}")
            sys.exit(1)
        skip(f"no GPU, and {sys.executable} has no PyTorch")
    if not torch.cuda.is_available():
        if gpu_visible():
            print(f"FAIL: a GPU is visible but PyTorch {torch.__version__} of {sys.executable} "
                  f"cannot use it (torch.version.cuda = {torch.version.cuda}): {fix}")
            sys.exit(1)
        skip("no CUDA GPU is visible to PyTorch")
    return torch
