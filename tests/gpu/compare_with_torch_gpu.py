"""folio on the GPU against PyTorch 2.x on the same GPU, both in fp32 (TF32 off): the checks of
tests/torch/compare_with_torch.py (logits, loss, every gradient and the weights after one AdamW
step, per tensor, to 1e-5; the end-to-end step to 1e-4) on a dump that folio_torch_dump writes
with --device=cuda --dtype=fp32, the same weights, batch and dropout masks.

    python3 compare_with_torch_gpu.py FOLIO_TORCH_DUMP OUT_DIR --config NAME [--KEY=VALUE ...]

Reads the safetensors files itself (no `safetensors` package needed). Exits 77 (ctest's
"skipped") when there is no GPU (a failure with FOLIO_REQUIRE_GPU=1); a GPU that this Python's
PyTorch cannot use is a failure that names the fix (gpu_required.py).
"""

import json
import os
import struct
import subprocess
import sys

from gpu_required import skip, torch_with_cuda_or_end

torch = torch_with_cuda_or_end()

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import compare_with_torch  # noqa: E402  (it imports tools/folio_torch.py)
DTYPES = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32, "I64": torch.int64}


def read_safetensors_to_gpu(path):
    """Tensors (on the GPU) and metadata of a safetensors file: 8-byte header size, JSON, data."""
    with open(path, "rb") as f:
        header_size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_size))
        data = f.read()
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        values = torch.frombuffer(bytearray(data[begin:end]), dtype=DTYPES[entry["dtype"]])
        tensors[name] = values.reshape(entry["shape"]).to("cuda")
    return tensors, metadata


def main(dump_binary, out_dir, *dump_options):
    dump = subprocess.run([dump_binary, *dump_options, "--device=cuda", "--dtype=fp32",
                           "--out", out_dir], capture_output=True, text=True)
    if dump.returncode != 0:
        if "no CUDA GPU is visible" in dump.stderr:
            skip("PyTorch sees a GPU but folio does not")
        sys.exit(f"folio_torch_dump failed: {dump.stderr}")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_default_device("cuda")
    compare_with_torch.folio_torch.read_safetensors = read_safetensors_to_gpu
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    return compare_with_torch.main(out_dir)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
