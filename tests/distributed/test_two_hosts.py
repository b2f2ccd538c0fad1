"""Several machines, simulated: two Linux network namespaces ("hosts") joined by a veth pair on a
private link (10.77.0.1 and 10.77.0.2), each running ranks that rendezvous and train over real
TCP between the namespaces. The losses must match one process with the same global batch.

  1. torchrun-style environment, 2 ranks per host (4 ranks): RANK, WORLD_SIZE, LOCAL_RANK,
     MASTER_ADDR=10.77.0.1, MASTER_PORT.
  2. SageMaker's environment, 1 rank per host as seed 002 runs it: SM_HOSTS, SM_CURRENT_HOST,
     SM_CHANNEL_TRAINING (the data folder) and SM_MODEL_DIR (where the checkpoint goes); the
     host names are not resolvable here, so MASTER_ADDR points at the first host.

Needs root (ip netns). Exits 77 (ctest: skipped, not passed), saying why, when this process may
not make network namespaces or there is no `ip` command; any other failed `ip` command fails the
test. Namespaces and interfaces left by an earlier run are removed first.

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


class NoNamespaces(Exception):
    """This machine will not let the test make network namespaces: a reason to skip."""


def ip(*args):
    """Runs `ip ARGS`; a failure raises RuntimeError naming the command and what ip said."""
    try:
        result = sh("ip", *args, check=False)
    except FileNotFoundError:
        raise NoNamespaces("there is no `ip` command (install iproute2)")
    if result.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed (exit {result.returncode}): "
                           f"{result.stderr.strip()}")
    return result


def make_hosts():
    remove_hosts()
    # The first namespace tells whether this process may make them at all.
    try:
        ip("netns", "add", list(HOSTS)[0])
    except RuntimeError as error:
        if any(word in str(error) for word in ("Operation not permitted", "Permission denied")):
            raise NoNamespaces(f"no privileges for network namespaces ({error})")
        raise
    for namespace in list(HOSTS)[1:]:
        ip("netns", "add", namespace)
    ip("link", "add", "folio_veth_a", "type", "veth", "peer", "name", "folio_veth_b")
    for (namespace, address), device in zip(HOSTS.items(), ("folio_veth_a", "folio_veth_b")):
        ip("link", "set", device, "netns", namespace)
        ip("-n", namespace, "addr", "add", address + "/24", "dev", device)
        ip("-n", namespace, "link", "set", device, "up")
        ip("-n", namespace, "link", "set", "lo", "up")


def remove_hosts():
    """Removes the namespaces and a veth pair an earlier run left (deleting a namespace deletes
    the end inside it; an end left in this namespace is deleted here). Raises RuntimeError when
    one is still there afterwards."""
    try:
        for namespace in HOSTS:
            sh("ip", "netns", "del", namespace, check=False)
        for device in ("folio_veth_a", "folio_veth_b"):
            sh("ip", "link", "del", device, check=False)
        left = [d for d in ("folio_veth_a", "folio_veth_b")
                if sh("ip", "link", "show", d, check=False).returncode == 0]
        left += [n for n in HOSTS if n in sh("ip", "netns", "list", check=False).stdout.split()]
    except FileNotFoundError:
        return  # no `ip`: nothing can have been left
    if left:
        raise RuntimeError(f"could not remove what an earlier run left: {', '.join(left)}")


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
    except NoNamespaces as reason:
        print(f"SKIP: {reason}")
        return 77
    except RuntimeError as error:
        print(f"FAIL: setting up the two hosts: {error}")
        try:
            remove_hosts()
        except RuntimeError as cleanup:
            print(f"FAIL: {cleanup}")
        return 1
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
