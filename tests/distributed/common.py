"""Helpers for the tests that run folio as several processes."""

import json
import os
import subprocess

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMPI_MCA_btl_vader_single_copy_mechanism": "none"}


def environment(extra=None):
    env = dict(os.environ)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                 "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_PROCID", "SM_HOSTS"):
        env.pop(name, None)
    env.update(MPI_ENV)
    env.update(extra or {})
    return env


def read_metrics(out_dir):
    """(train losses by step, eval (train, val) by step) from out_dir/metrics.jsonl."""
    train, evals = {}, {}
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if record["type"] == "train":
                train[record["step"]] = record["loss"]
            else:
                evals[record["step"]] = (record["train_loss"], record["val_loss"])
    return train, evals


def run(command, env=None, timeout=600):
    result = subprocess.run(command, capture_output=True, text=True, env=environment(env),
                            timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f"command failed ({result.returncode}): {' '.join(command)}\n"
                         f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return result


def largest_relative_difference(a, b):
    worst = 0.0
    for key in a:
        values_a = a[key] if isinstance(a[key], tuple) else (a[key],)
        values_b = b[key] if isinstance(b[key], tuple) else (b[key],)
        for x, y in zip(values_a, values_b):
            worst = max(worst, abs(x - y) / abs(y))
    return worst


def safetensors_tensors(path):
    """{name: raw bytes} of a safetensors file, read with the standard library only."""
    import struct
    with open(path, "rb") as f:
        raw = f.read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    data = raw[8 + size:]
    return {name: data[entry["data_offsets"][0]:entry["data_offsets"][1]]
            for name, entry in header.items() if name != "__metadata__"}


def metrics_without_times(out_dir):
    """metrics.jsonl's records without their wall-clock fields."""
    records = []
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            for timing in ("time_s", "ms_per_step", "tokens_per_s", "mfu"):
                record.pop(timing, None)
            records.append(record)
    return records


def children_of(pid):
    """All descendants of pid, from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent:
                found.append(child)
                frontier.append(child)
    return found


def kill_tree(pid):
    """SIGKILL to pid and every descendant (mpirun puts its ranks in process groups of their
    own, so killing its group is not enough)."""
    import signal
    for victim in [pid] + children_of(pid):
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
