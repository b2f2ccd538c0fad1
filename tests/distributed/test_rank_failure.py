"""When a rank dies or hangs, the others stop with a clear message within a known time.

  - `--nproc 2`, rank 1 killed (SIGKILL): rank 0 sees its connection close at once and exits
    non-zero naming rank 1; the launcher says which rank died. Bound: a few seconds.
  - `--nproc 2`, rank 1 frozen (SIGSTOP): rank 0 gives up after dist_timeout (4 s here) naming
    rank 1; the launcher then kills the frozen rank. Bound: dist_timeout + the launcher's 10 s.
  - mpirun -np 2, rank 1 killed: mpirun stops the job (SIGTERM, then SIGKILL); rank 0 says at once
    which collective it was waiting in. Bound: mpirun's own kill delay, a few seconds.
  - mpirun -np 2, rank 1 frozen: rank 0 gives up after dist_timeout, naming the collective.
  - `--nproc 3`, rank 2 killed: rank 0 names rank 2 (Gloo's messages name a socket address; the
    rendezvous store, rank 0's, says which rank's connection closed), unless its write to rank 2
    came before it read the close: then SIGPIPE ends it at once saying a connection to another
    rank closed (the launcher names rank 2), or Gloo never reads the close and rank 0 names rank
    2 after dist_timeout (about once in 30 runs); so does rank 1, unless it
    was waiting on rank 0 alone and rank 0 had stopped, store and all, by the time it asked: then
    it says so and points at rank 0's message.


And when ranks disagree: rank 0 given a text with one character more than rank 1's (a vocabulary
of 66, so a model with more parameters to broadcast than rank 1 takes) must stop every rank with
the one error that says so, before any collective whose length depends on the model (the
broadcast of rank 0's weights; checked after it, Gloo aborted on the lengths, "EnforceNotMet",
exit 134): launched by hand with torchrun's variables (Gloo) and by mpirun with a program per
rank (MPI).

    python3 test_rank_failure.py FOLIO DATA WORK_DIR
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

from common import children_of, environment, MPI_ENV


def rank_process(launcher_pid, rank):
    """The folio process of `rank` under the launcher (by its RANK / OMPI rank variable)."""
    for pid in children_of(launcher_pid):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        value = env.get(b"OMPI_COMM_WORLD_RANK", env.get(b"RANK"))
        if b"train" in command and value == str(rank).encode():
            return pid
    return None


def scenario(name, command, work, signal_number, expected, bound_seconds, victim_rank=1,
             patterns=()):
    """Runs command, hits victim_rank with signal_number once training runs; stderr must hold
    every `expected` text and match every regular expression of `patterns`."""
    out_dir = os.path.join(work, name.replace(" ", "_"))
    process = subprocess.Popen(command + ["--out_dir", out_dir], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=environment(),
                               start_new_session=True)
    # Wait until training runs (the first evaluation is printed), then hit rank 1.
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(out_dir, "ckpt.safetensors")) and time.time() < deadline:
        time.sleep(0.1)
    victim = rank_process(process.pid, victim_rank)
    problems = []
    if victim is None:
        problems.append(f"rank {victim_rank} not found")
    else:
        os.kill(victim, signal_number)
    start = time.time()
    try:
        stdout, stderr = process.communicate(timeout=bound_seconds)
        elapsed = time.time() - start
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        elapsed = None
        problems.append(f"still running after {bound_seconds} s")
    if process.returncode == 0:
        problems.append("exit code 0")
    for text in expected:
        if text not in stderr:
            problems.append(f"stderr lacks {text!r}")
    for pattern in patterns:
        if not re.search(pattern, stderr):
            problems.append(f"stderr does not match {pattern!r}")
    if victim is not None and signal_number == signal.SIGSTOP:
        try:
            os.kill(victim, signal.SIGKILL)  # in case anything was left behind
        except ProcessLookupError:
            pass
    timing = f"{elapsed:.1f} s" if elapsed is not None else "timeout"
    print(f"{name}: exit {process.returncode} after {timing}: "
          f"{'ok' if not problems else 'FAIL ' + '; '.join(problems)}")
    print("    " + "\n    ".join(line for line in stderr.strip().splitlines() if line.strip()))
    return problems


def free_port():
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def disagreeing_ranks(folio, data, work):
    """Rank 0 trains on a text with a character more than rank 1's; [] when both ranks stop with
    the disagreement's error, else what went wrong."""
    other = os.path.join(work, "one_character_more.txt")
    os.makedirs(work, exist_ok=True)
    with open(data, "rb") as source, open(other, "wb") as target:
        target.write(source.read() + b"~\n")
    train = ["train", "--config", "tiny", "--max_iters=3", "--sample_tokens=0", "--threads=1",
             "--dist_timeout=20"]
    expected = "rank 1 runs a different config or data file than rank 0"
    failures = []
    port = str(free_port())
    ranks = []
    for rank, text in ((0, other), (1, data)):
        env = environment({"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
                           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port})
        ranks.append(subprocess.Popen([folio] + train + ["--data", text, "--out_dir",
                                                         os.path.join(work, "disagree_env")],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=env))
    for rank, process in enumerate(ranks):
        try:
            _, stderr = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            failures.append(f"torchrun variables, rank {rank}: still running after 60 s")
            continue
        if process.returncode != 1 or expected not in stderr:
            failures.append(f"torchrun variables, rank {rank}: exit {process.returncode}, "
                            f"stderr:\n{stderr[-1500:]}")
    out_dir = os.path.join(work, "disagree_mpi")
    command = (["mpirun", "-np", "1", folio] + train + ["--data", other, "--out_dir", out_dir] +
               [":", "-np", "1", folio] + train + ["--data", data, "--out_dir", out_dir])
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60,
                                env=environment(MPI_ENV))
        if result.returncode == 0 or (result.stdout + result.stderr).count(expected) != 2:
            failures.append(f"mpirun: exit {result.returncode}, output:\n"
                            f"{(result.stdout + result.stderr)[-1500:]}")
    except subprocess.TimeoutExpired:
        failures.append("mpirun: still running after 60 s")
    for failure in failures:
        print(f"FAIL disagreeing ranks: {failure}")
    if not failures:
        print("ok   disagreeing ranks: every rank stopped with the disagreement's error")
    return failures


def ranks_resuming_unlike_states(folio, data, work):
    """Rank 0 resumes a 2-rank run at step 3, rank 1 a copy of it taken on to step 5: both stop
    at once naming the steps (they had trained on until their weights were found to differ, and
    then blamed a non-deterministic collective); [] when they do."""
    train = ["train", "--config", "tiny", "--sample_tokens=0", "--threads=1", "--quiet",
             "--dist_timeout=20"]
    early, later = os.path.join(work, "resume_early"), os.path.join(work, "resume_later")
    for command in ([folio] + train + ["--data", data, "--out_dir", early, "--max_iters=3",
                                       "--nproc", "2"],
                    ["cp", "-r", early, later],
                    [folio, "train", "--resume", later, "--max_iters=5", "--nproc", "2",
                     "--quiet"]):
        result = subprocess.run(command, capture_output=True, text=True, timeout=120,
                                env=environment())
        if result.returncode != 0:
            print(f"FAIL unlike states: {' '.join(command)} failed: {result.stderr[-800:]}")
            return ["unlike states"]
    expected = "rank 1 resumes at step 5 and rank 0 resumes at step 3"
    command = (["mpirun", "-np", "1", folio, "train", "--resume", early, "--max_iters=8"] +
               [":", "-np", "1", folio, "train", "--resume", later, "--max_iters=8"])
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60,
                                env=environment(MPI_ENV))
        output = result.stdout + result.stderr
        if result.returncode == 0 or output.count(expected) != 2:
            print(f"FAIL unlike states: exit {result.returncode}, output:\n{output[-1500:]}")
            return ["unlike states"]
    except subprocess.TimeoutExpired:
        print("FAIL unlike states: still running after 60 s")
        return ["unlike states"]
    print("ok   ranks resuming unlike states: both stopped naming the steps")
    return []


def main(folio, data, work):
    shutil.rmtree(work, ignore_errors=True)
    train = ["train", "--config", "tiny", "--data", data, "--max_iters=1000000",
             "--eval_interval=1000000", "--sample_tokens=0", "--log_interval=0",
             "--checkpoint_interval=0", "--dist_timeout=4", "--threads=1"]
    failures = []
    failures += scenario("nproc, rank 1 killed", [folio] + train + ["--nproc", "2"], work,
                         signal.SIGKILL,
                         ["rank 1 was killed by signal 9",
                          "rank 0: the connection was closed by rank 1"], 10)
    failures += scenario("nproc 3, rank 2 killed", [folio] + train + ["--nproc", "3"], work,
                         signal.SIGKILL, ["rank 2 was killed by signal 9"], 10, victim_rank=2,
                         # rank 0 names rank 2; or, when its write to rank 2 came before it
                         # read the close (SIGPIPE, waiting_for_peers.h), says a connection
                         # closed; or, when Gloo never reads the close (seen about once in 30
                         # runs), names rank 2 after dist_timeout
                         patterns=[r"rank 0: (the connection (was closed by (rank \d, )*rank 2 |"
                                   r"to another rank was closed \(a write found it gone)|"
                                   r"waited 4 s \(dist_timeout\) for (rank \d, )*rank 2 )",
                                   # rank 1 may wait on rank 0 alone (a ring), and see only that
                                   # rank 0 stopped, after the store that knew rank 2 went with it
                                   r"rank 1: the connection was closed by ((rank \d, )*rank 2 |"
                                   r"rank 0 \(it has stopped.*see rank 0's message\))"])
    failures += scenario("nproc, rank 1 frozen", [folio] + train + ["--nproc", "2"], work,
                         signal.SIGSTOP,
                         ["rank 0: waited 4 s (dist_timeout) for rank 1"], 4 + 10 + 10)
    failures += scenario("mpirun, rank 1 killed", ["mpirun", "-np", "2", folio] + train, work,
                         signal.SIGKILL,
                         ["rank 0: the signal came while waiting for the other ranks",
                          "exited on signal 9"], 15)
    failures += scenario("mpirun, rank 1 frozen", ["mpirun", "-np", "2", folio] + train, work,
                         signal.SIGSTOP,
                         ["rank 0: waited 4 s (dist_timeout) for the other ranks"], 4 + 20)
    failures += disagreeing_ranks(folio, data, work)
    failures += ranks_resuming_unlike_states(folio, data, work)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
