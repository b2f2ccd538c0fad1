"""--dtype bf16 on the CPU trains `baby` as fp32 does, and its checkpoint stays fp32.

200 steps of `baby` on tiny-Shakespeare, once in fp32 and once with bf16 products, same seed and
batches. The two loss curves start identical (within bf16's rounding) and part only as rounding
differences grow, so the band is on 20-step means of the training loss (one step's loss is
noisy: it depends on its batch): every window of the bf16 run within BAND of fp32's. Measured on
the 2-core Xeon (Sapphire Rapids class, AMX), 2026-11-24: the largest window gap was
0.0002, against the 4.17 -> 2.5 fall of the loss over these steps; a sign error or a wrong
operand in a bf16 product moves the curve far more than BAND. (That the operands really are
rounded to bf16 is tests/test_cpu_bf16.cpp's to check.)

    python3 test_bf16_training.py FOLIO_BINARY DATA_FILE
"""

import json
import os
import struct
import subprocess
import sys
import tempfile

STEPS = 200
WINDOW = 20
BAND = 0.01


def train(folio, data, dtype):
    out_dir = tempfile.mkdtemp(prefix=f"folio_bf16_{dtype}_")
    result = subprocess.run(
        [folio, "train", "--config", "baby", "--data", data, "--out_dir", out_dir, "--device=cpu",
         f"--max_iters={STEPS}", f"--eval_interval={STEPS}", "--log_interval=1",
         "--sample_tokens=0", f"--dtype={dtype}"],
        capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stdout[-2000:], result.stderr)
        sys.exit(f"folio train --dtype {dtype} failed")
    records = [json.loads(line) for line in open(os.path.join(out_dir, "metrics.jsonl"))]
    losses = {r["step"]: r["loss"] for r in records if "loss" in r}
    return [losses[s] for s in sorted(losses)], out_dir


def checkpoint_dtypes(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    return {v["dtype"] for k, v in header.items() if k != "__metadata__"}


def main(folio, data):
    fp32, _ = train(folio, data, "fp32")
    bf16, bf16_dir = train(folio, data, "bf16")
    failures = []
    if len(fp32) != STEPS or len(bf16) != STEPS:
        failures.append(f"{len(fp32)} fp32 and {len(bf16)} bf16 losses, not {STEPS} each")
    gaps = []
    for start in range(0, min(len(fp32), len(bf16)) - WINDOW + 1, WINDOW):
        mean = lambda xs: sum(xs[start:start + WINDOW]) / WINDOW  # noqa: E731
        gaps.append(abs(mean(bf16) - mean(fp32)))
    print(f"fp32 loss {fp32[0]:.4f} -> {fp32[-1]:.4f}, bf16 {bf16[0]:.4f} -> {bf16[-1]:.4f}; "
          f"20-step mean gaps {' '.join(f'{g:.4f}' for g in gaps)}")
    if not gaps or max(gaps) > BAND:
        failures.append(f"bf16's loss left the band of {BAND} around fp32's")
    if abs(fp32[0] - bf16[0]) > 0.01:
        failures.append(f"first losses differ: {fp32[0]} and {bf16[0]}")
    if not fp32[-1] < fp32[0] - 1.0:
        failures.append("fp32 did not learn: the comparison means nothing")
    dtypes = checkpoint_dtypes(os.path.join(bf16_dir, "ckpt.safetensors"))
    if dtypes != {"F32"}:
        failures.append(f"the bf16 run's checkpoint holds {dtypes}, not fp32 only")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
