"""Several machines, simulated: two Linux network namespaces ("hosts") joined by a veth pair on a
private link (10.77.0.1 and 10.77.0.2), each running ranks that rendezvous and train over real
TCP between the namespaces. The losses must match one process with the same global batch.

  1. torchrun-style environment, 2 ranks per host (4 ranks): RANK, WORLD_SIZE, LOCAL_RANK,
     MASTER_ADDR=10.77.0.1, MASTER_PORT.
  2. SageMaker's environment, 1 rank per host as seed 002 runs it: SM_HOSTS, SM_CURRENT_HOST,
     SM_CHANNEL_TRAINING (the data folder) and SM_MODEL_DIR (where the checkpoint goes); the
     host names are not resolvable here, so MASTER_ADDR points at the first host.

Needs root (ip netns). Exits 77 (ctest: skipped, not passed) when namespaces cannot be made.

    python3 test_two_hosts.py FOLIO DATA WORK_DIR
"""

import os
import shutil
import subprocess
import sys

from common import environment, largest_relative_difference, read_metrics, run

HOSTS = {"folio_host_a": "10.77.0.1", "folio_host_b": "10.77.0.2"}
TOLERANCE = 1e-4


def sh(*args, check=True):
    return subprocess.run(args, capture_output=True, text=True, check=check)


def make_hosts():
    remove_hosts()
    for namespace in HOSTS:
        sh("ip", "netns", "add", namespace)
    sh("ip", "link", "add", "folio_veth_a", "type", "veth", "peer", "name", "folio_veth_b")
    for (namespace, address), device in zip(HOSTS.items(), ("folio_veth_a", "folio_veth_b")):
        sh("ip", "link", "set", device, "netns", namespace)
        sh("ip", "-n", namespace, "addr", "add", address + "/24", "dev", device)
        sh("ip", "-n", namespace, "link", "set", device, "up")
        sh("ip", "-n", namespace, "link", "set", "lo", "up")


def remove_hosts():
    for namespace in HOSTS:
        sh("ip", "netns", "del", namespace, check=False)


def launch(ranks, base_env):
    """Starts (namespace, env, command) triples; waits for all; returns their outputs."""
    processes = []
    for namespace, env, command in ranks:
        processes.append(subprocess.Popen(["ip", "netns", "exec", namespace] + command,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, env=environment({**base_env, **env})))
    outputs = [p.communicate(timeout=600) for p in processes]
    for p, (out, err) in zip(processes, outputs):
        if p.returncode != 0:
            raise SystemExit(f"a rank failed ({p.returncode}):\n{out[-1500:]}\n{err[-1500:]}")
    return outputs


def losses_problems(name, out_dir, reference):
    """The run in out_dir against the one-process reference: the same train steps and the same eval
    steps, with losses within TOLERANCE. Prints the largest difference; returns the failures."""
    got = read_metrics(out_dir)
    problems = []
    for kind, steps, expected in (("train", got[0], reference[0]), ("eval", got[1], reference[1])):
        if sorted(steps) != sorted(expected):  # a missing step would not show in the losses
            problems.append(f"{name}: {kind} steps {sorted(steps)}, expected {sorted(expected)}")
    if problems:
        return problems
    worst = max(largest_relative_difference(got[0], reference[0]),
                largest_relative_difference(got[1], reference[1]))
    print(f"{name}: max relative loss difference {worst:.2e}")
    if not worst < TOLERANCE:
        problems.append(f"{name}: losses differ ({worst:.2e})")
    return problems


def main(folio, data, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        make_hosts()
    except (subprocess.CalledProcessError, FileNotFoundError) as error:
        print(f"cannot create network namespaces here ({error}); skipping")
        return 77
    failures = []
    try:
        train = ["train", "--config", "tiny", "--max_iters=30", "--eval_interval=10",
                 "--eval_iters=4", "--log_interval=1", "--sample_tokens=0", "--threads=1",
                 "--checkpoint_interval=0"]
        # One process with the global batch: 4 ranks x 4 windows, and 2 hosts x 8 windows.
        reference_dir = os.path.join(work, "one_process")
        run([folio] + train + ["--data", data, "--batch_size=16", "--out_dir", reference_dir])
        reference = read_metrics(reference_dir)

        # 1. torchrun-style, two ranks per host.
        torchrun_dir = os.path.join(work, "torchrun")
        ranks = []
        for rank in range(4):
            namespace = list(HOSTS)[rank // 2]
            env = {"RANK": str(rank), "WORLD_SIZE": "4", "LOCAL_RANK": str(rank % 2),
                   "MASTER_ADDR": HOSTS["folio_host_a"], "MASTER_PORT": "29581"}
            ranks.append((namespace, env, [folio] + train + ["--data", data, "--batch_size=4",
                                                             "--out_dir", torchrun_dir]))
        outputs = launch(ranks, {})
        if "distributed: 4 ranks started by torchrun-style environment" not in outputs[0][0]:
            failures.append("torchrun: rank 0 did not announce 4 ranks")
        failures += losses_problems("torchrun-style, 2 hosts x 2 ranks", torchrun_dir, reference)

        # 2. SageMaker, one rank per host, data and model folders from the channels.
        channel = os.path.join(work, "channel_training")
        os.makedirs(channel)
        shutil.copy(data, os.path.join(channel, "input.txt"))
        model_dir = os.path.join(work, "sm_model")
        reference_dir = os.path.join(work, "one_process_8")
        run([folio] + train + ["--data", data, "--batch_size=16", "--out_dir", reference_dir])
        reference = read_metrics(reference_dir)
        ranks = []
        for host_index, namespace in enumerate(HOSTS):
            env = {"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": f"algo-{host_index + 1}",
                   "SM_CHANNEL_TRAINING": channel, "SM_MODEL_DIR": model_dir,
                   "MASTER_ADDR": HOSTS["folio_host_a"], "MASTER_PORT": "29582"}
            ranks.append((namespace, env, [folio] + train + ["--batch_size=8"]))
        outputs = launch(ranks, {})
        if "distributed: 2 ranks started by SageMaker" not in outputs[0][0]:
            failures.append("SageMaker: rank 0 did not announce 2 ranks")
        if not os.path.exists(os.path.join(model_dir, "ckpt.safetensors")):
            failures.append("SageMaker: no checkpoint in SM_MODEL_DIR")
        failures += losses_problems("SageMaker, 2 hosts x 1 rank", model_dir, reference)
    finally:
        remove_hosts()
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
