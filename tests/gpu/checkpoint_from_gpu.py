"""A checkpoint that folio wrote while training on the GPU loads in folio on the CPU and in
PyTorch with the same losses: `folio eval --device cpu` against tools/folio_torch.py (the seed's
model in PyTorch, fp32 on the CPU, loaded with load_state_dict), over every window of both
splits of the text's first 200,000 characters (the whole text would keep a GPU machine's CPUs
busy for minutes), to 1e-5 relative. bench/gpu/gpu_check.sh full runs it on the checkpoint of
its 5000-step GPU run; ctest (label gpu) with --train, which first trains `tiny` on the GPU
for 30 steps in WORK_DIR (skipped without a GPU: gpu_required.py).

    python3 checkpoint_from_gpu.py FOLIO DATA CKPT
    python3 checkpoint_from_gpu.py FOLIO DATA --train WORK_DIR
"""

import json
import os
import shutil
import subprocess
import sys

from gpu_required import skip

TOLERANCE = 1e-5
PREFIX_CHARACTERS = 200_000
TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")


def last_json_line(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def train_on_the_gpu(folio, data, work_dir):
    """30 steps of `tiny` on the GPU (bf16, dropout on); returns its checkpoint's path."""
    shutil.rmtree(work_dir, ignore_errors=True)
    command = [folio, "train", "--config", "tiny", "--data", data, "--out_dir", work_dir,
               "--device=cuda", "--max_iters=30", "--eval_interval=10", "--eval_iters=2",
               "--sample_tokens=0"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        if "no CUDA GPU is visible" in result.stderr:
            skip("no CUDA GPU is visible")
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    return os.path.join(work_dir, "ckpt.safetensors")


def main(folio, data, ckpt, work_dir=None):
    if ckpt == "--train":
        ckpt = train_on_the_gpu(folio, data, work_dir)
    if not os.path.isfile(ckpt):
        print(f"FAIL: no checkpoint at {ckpt} (did the GPU run that should write it run?)")
        return 1
    with open(data, encoding="utf-8") as f:
        head = f.read(PREFIX_CHARACTERS)
    text = os.path.join(os.path.dirname(os.path.abspath(ckpt)), "checkpoint_from_gpu.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write(head)
    on_cpu = last_json_line([folio, "eval", "--ckpt", ckpt, "--data", text, "--device", "cpu",
                             "--quiet"])
    in_torch = last_json_line([sys.executable, os.path.join(TOOLS, "folio_torch.py"), ckpt,
                               "--data", text])
    worst = max(abs(on_cpu[k] - in_torch[k]) / abs(in_torch[k]) for k in ("train_loss", "val_loss"))
    status = "ok" if worst < TOLERANCE else "FAIL"
    print(json.dumps({"status": status, "folio_cpu": on_cpu, "pytorch": in_torch,
                      "worst_relative_difference": worst}))
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
