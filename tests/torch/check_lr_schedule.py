"""folio's learning-rate schedule against nanoGPT's get_lr, written out again here (train.py):

    if it < warmup_iters: return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters: return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)

and, with lr_schedule = constant (the seed), learning_rate at every step. Two checks:

  1. folio_optimizer_dump's learning_rate_at at every step from 0 to past lr_decay_iters, for the
     presets as written in configs/ and for edge cases (no warm-up, a floor of 0, min_lr equal to
     learning_rate, a one-step warm-up), to 1e-12 of the peak rate: warm-up, cosine, floor and constant,
     and the steps where one phase hands over to the next;
  2. the trainer uses the schedule at the right step: `folio train` logs each step's learning rate
     in metrics.jsonl (record step s is the step that took the rate of step s - 1).

Needs only Python (no torch).

    python3 check_lr_schedule.py OPTIMIZER_DUMP FOLIO DATA WORK_DIR
"""

import json
import math
import os
import shutil
import subprocess
import sys

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs")
TOLERANCE = 1e-12  # of the peak learning rate: both sides compute in double
KEYS = ("learning_rate", "lr_schedule", "warmup_iters", "lr_decay_iters", "min_lr")


def preset(name):
    """The schedule keys of configs/NAME.conf (key = value lines, # comments)."""
    values = {}
    with open(os.path.join(CONFIGS, name + ".conf")) as f:
        for line in f:
            key, _, value = line.split("#")[0].partition("=")
            if key.strip() in KEYS:
                values[key.strip()] = value.strip()
    return values


def nanogpt_lr(it, cfg):
    """(learning rate, phase) at iteration `it`."""
    learning_rate = float(cfg["learning_rate"])
    if cfg.get("lr_schedule", "constant") != "cosine":
        return learning_rate, "constant"
    warmup_iters, lr_decay_iters = int(cfg["warmup_iters"]), int(cfg["lr_decay_iters"])
    min_lr = float(cfg["min_lr"])
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1), "warm-up"
    if it > lr_decay_iters:
        return min_lr, "floor"
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr), "cosine"


def differs(got, want, cfg):
    """More than TOLERANCE of the peak rate apart (a floor of 0 has no relative error)."""
    return not abs(got - want) <= TOLERANCE * float(cfg["learning_rate"])


# (preset, overrides, steps to check)
CASES = [
    ("nanogpt_char", {}, 5200),
    ("shakespeare_char", {}, 300),
    ("tiny", {}, 50),
    ("tiny", {"lr_schedule": "cosine", "warmup_iters": "0", "lr_decay_iters": "300",
              "learning_rate": "6e-4", "min_lr": "6e-5"}, 400),
    ("tiny", {"lr_schedule": "cosine", "warmup_iters": "7", "lr_decay_iters": "20",
              "learning_rate": "1e-2", "min_lr": "0"}, 40),
    ("tiny", {"lr_schedule": "cosine", "warmup_iters": "1", "lr_decay_iters": "2",
              "learning_rate": "3e-3", "min_lr": "3e-4"}, 10),
    ("tiny", {"lr_schedule": "cosine", "warmup_iters": "3", "lr_decay_iters": "10",
              "learning_rate": "5e-4", "min_lr": "5e-4"}, 20),
]


def check_schedules(dump, failures):
    for name, overrides, steps in CASES:
        cfg = {**preset(name), **overrides}
        arguments = [f"--{key}={value}" for key, value in overrides.items()]
        result = subprocess.run([dump, "schedule", "--config", name, "--steps", str(steps)]
                                + arguments, capture_output=True, text=True, check=True)
        rates = json.loads(result.stdout)["learning_rates"]
        label = " ".join([name] + arguments)
        if len(rates) != steps:
            failures.append(f"{label}: {len(rates)} rates for {steps} steps")
        wrong = []
        phases = set()
        for it, got in enumerate(rates):
            want, phase = nanogpt_lr(it, cfg)
            phases.add(phase)
            if differs(got, want, cfg):
                wrong.append(f"step {it} ({phase}): folio {got!r}, nanoGPT {want!r}")
        if wrong:
            failures.append(f"{label}: {len(wrong)} of {steps} steps differ, first "
                            + "; ".join(wrong[:3]))
        print(f"{label}: {steps} steps, phases {sorted(phases)}: "
              f"{'ok' if not wrong else 'FAIL'}")


def check_trainer(folio, data, work, failures):
    cfg = {"lr_schedule": "cosine", "warmup_iters": "4", "lr_decay_iters": "16",
           "learning_rate": "1e-2", "min_lr": "1e-3"}
    out_dir = os.path.join(work, "trained")
    subprocess.run([folio, "train", "--config", "tiny", "--data", data, "--out_dir", out_dir,
                    "--max_iters=20", "--log_interval=1", "--eval_interval=100", "--eval_iters=1",
                    "--sample_tokens=0", "--checkpoint_interval=0", "--threads=1"]
                   + [f"--{key}={value}" for key, value in cfg.items()],
                   capture_output=True, text=True, check=True)
    logged = {}
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if record["type"] == "train":
                logged[record["step"]] = record["lr"]
    if sorted(logged) != list(range(1, 21)):
        failures.append(f"trainer: logged steps {sorted(logged)}, expected 1..20")
    for step, got in sorted(logged.items()):
        want, phase = nanogpt_lr(step - 1, cfg)
        if differs(got, want, cfg):
            failures.append(f"trainer: step {step} ({phase}) trained at lr {got!r}, "
                            f"nanoGPT's schedule gives {want!r}")
            break
    print(f"trainer: {len(logged)} logged learning rates checked")


def main(dump, folio, data, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failures = []
    check_schedules(dump, failures)
    check_trainer(folio, data, work, failures)
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
