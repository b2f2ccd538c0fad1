"""SLURM for real: a one-machine cluster (munged, slurmctld and slurmd started here with a
temporary slurm.conf, munge key and state folders under WORK_DIR), then
`srun --mpi=pmix -n 2 folio train ...` (Open MPI through PMIx, as a SLURM site runs folio),
checked against one process with the same global batch: the same steps, losses within 1e-4, and
rank 0 announcing 2 ranks started by srun over MPI.

Exits 77 (ctest: skipped, not passed) with the reason printed when the daemons cannot run here
(not root, SLURM or munge not installed, a daemon that does not come up). The daemons are
stopped at the end whatever happens.

    python3 test_slurm.py FOLIO DATA WORK_DIR
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from common import environment, largest_relative_difference, read_metrics, run

TOLERANCE = 1e-4
SKIP = 77


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(work, host, cpus, munge_socket):
    paths = {name: os.path.join(work, name) for name in ("state", "spool", "log", "run")}
    for path in paths.values():
        os.makedirs(path, exist_ok=True)
    config = os.path.join(work, "slurm.conf")
    with open(config, "w") as f:
        f.write(f"""ClusterName=folio
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
StateSaveLocation={paths['state']}
SlurmdSpoolDir={paths['spool']}
SlurmctldPidFile={paths['run']}/slurmctld.pid
SlurmdPidFile={paths['run']}/slurmd.pid
SlurmctldLogFile={paths['log']}/slurmctld.log
SlurmdLogFile={paths['log']}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=folio Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")
    return config, paths["log"]


def wait_for(condition, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.3)
    return False


def tail(path, lines=15):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_leftover_steps(config):
    """SIGKILL to any slurmstepd of this test's cluster (found by SLURM_CONF in its environment):
    once the daemons are gone a step manager would retry reporting to them for minutes."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read()
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if command.startswith(b"slurmstepd") and f"SLURM_CONF={config}".encode() in environ:
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                pass


def main(folio, data, work):
    missing = [tool for tool in ("munged", "slurmctld", "slurmd", "srun", "sinfo", "squeue")
               if shutil.which(tool) is None]
    if missing:
        print(f"SLURM or munge is not installed ({', '.join(missing)} missing: apt-get install "
              "slurm-wlm munge); skipping")
        return SKIP
    if os.geteuid() != 0:
        print("slurmd must run as root to start jobs; skipping (run the tests as root)")
        return SKIP
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    work = os.path.realpath(work)
    host = socket.gethostname().split(".")[0]
    cpus = os.cpu_count() or 2
    daemons = []
    config = None
    try:
        # munge: a key of our own, a socket of our own.
        munge_dir = os.path.join(work, "munge")
        os.makedirs(munge_dir, mode=0o700)
        key = os.path.join(munge_dir, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o600)
        munge_socket = os.path.join(munge_dir, "munge.socket")
        daemons.append(subprocess.Popen(
            ["munged", "--foreground", "--force", f"--key-file={key}", f"--socket={munge_socket}",
             f"--pid-file={munge_dir}/munged.pid", f"--log-file={munge_dir}/munged.log",
             f"--seed-file={munge_dir}/munged.seed"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        if not wait_for(lambda: os.path.exists(munge_socket), 10):
            print(f"munged did not start; skipping\n{tail(munge_dir + '/munged.log')}")
            return SKIP

        config, logs = write_config(work, host, cpus, munge_socket)
        env = environment({"SLURM_CONF": config})
        for daemon in ("slurmctld", "slurmd"):
            daemons.append(subprocess.Popen([daemon, "-D", "-f", config], env=env,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        def node_idle():
            result = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env,
                                    capture_output=True, text=True)
            return result.returncode == 0 and result.stdout.strip().startswith("idle")
        if not wait_for(node_idle, 30):
            print("the SLURM daemons did not bring the node up; skipping\n"
                  f"slurmctld: {tail(logs + '/slurmctld.log')}\nslurmd: {tail(logs + '/slurmd.log')}")
            return SKIP

        train = ["train", "--config", "tiny", "--data", data, "--max_iters=40",
                 "--eval_interval=10", "--eval_iters=4", "--log_interval=1",
                 "--sample_tokens=0", "--checkpoint_interval=0", "--threads=1"]
        reference_dir = os.path.join(work, "one_process")
        run([folio] + train + ["--batch_size=16", "--out_dir", reference_dir])
        reference = read_metrics(reference_dir)

        slurm_dir = os.path.join(work, "srun")
        result = run(["srun", "--mpi=pmix", "-n", "2", "--time=10", folio] + train +
                     ["--batch_size=8", "--out_dir", slurm_dir],
                     env={"SLURM_CONF": config}, timeout=300)
        # Let the job's step managers report to slurmctld before the daemons stop.
        wait_for(lambda: subprocess.run(["squeue", "-h"], env=env, capture_output=True,
                                        text=True).stdout.strip() == "", 30)
        failures = []
        if "distributed: 2 ranks started by srun, collectives over mpi" not in result.stdout:
            failures.append("srun: rank 0 did not announce 2 ranks started by srun over mpi")
        got = read_metrics(slurm_dir)
        worst = max(largest_relative_difference(got[0], reference[0]),
                    largest_relative_difference(got[1], reference[1]))
        print(f"srun -n 2 against one process: max relative loss difference {worst:.2e} "
              f"over {len(got[0])} steps and {len(got[1])} evaluations")
        if sorted(got[0]) != sorted(reference[0]) or sorted(got[1]) != sorted(reference[1]):
            failures.append("srun: different steps recorded")
        if not worst < TOLERANCE:
            failures.append(f"srun: losses differ by {worst:.2e}")
        for failure in failures:
            print("FAIL", failure)
        return 1 if failures else 0
    finally:
        for daemon in reversed(daemons):
            daemon.send_signal(signal.SIGTERM)
        for daemon in reversed(daemons):
            try:
                daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        if config:
            stop_leftover_steps(config)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
