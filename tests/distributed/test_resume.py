"""A run killed with SIGKILL at any moment, and resumed, ends with weights bit-identical to an
uninterrupted run; so does one stopped cleanly with SIGTERM, or with Ctrl-C under `--nproc 2`
(the terminal signals the whole process group), or by killing its `--nproc 2` launcher outright;
and a second signal stops at once, naming the files the folder holds (a resumed run's too).

The run saves its training state every step (checkpoint_interval=1) so that a good share of the
random kill points fall inside a save; a kill that leaves a temporary file behind proves it hit a
write, and the test kills on (up to three times as often) until at least one did (kill points:
wait_for_the_kill). After the kills the run is resumed to the
end, and its final state (parameters, AdamW moments), its best checkpoint and its metrics (less
wall-clock fields) must equal the uninterrupted run's exactly. The same is done with 2 MPI ranks.

    python3 test_resume.py FOLIO DATA WORK_DIR [KILLS]

FOLIO_TEST_DEVICE=cuda runs every run on the GPU (bench/gpu/gpu_check.sh sanitize does: a rerun on
the same GPU gives the same bits, so a resumed run must too); unset, folio picks (ctest hides any
GPU from this test, so there it is the CPU).
"""

import glob
import os
import random
import shutil
import signal
import subprocess
import sys
import time

from common import children_of, environment, kill_tree, metrics_without_times, run, safetensors_tensors

STEPS = 120


def train_command(folio, data, out_dir, launcher):
    return launcher + [folio, "train", "--config", "baby", "--data", data, "--out_dir", out_dir,
                       f"--max_iters={STEPS}", "--eval_interval=40", "--eval_iters=2",
                       "--log_interval=5", "--sample_tokens=0", "--checkpoint_interval=1",
                       "--dropout=0.1", "--threads=1",
                       f"--device={os.environ.get('FOLIO_TEST_DEVICE', 'auto')}"]


def resume_command(folio, out_dir, launcher):
    return launcher + [folio, "train", "--resume", out_dir]


def same_run(reference_dir, out_dir):
    problems = []
    for name in ("state.safetensors", "ckpt.safetensors"):
        a = safetensors_tensors(os.path.join(reference_dir, name))
        b = safetensors_tensors(os.path.join(out_dir, name))
        differing = [key for key in a if a[key] != b.get(key)]
        if differing or a.keys() != b.keys():
            problems.append(f"{name}: {len(differing)} tensors differ, e.g. {differing[:3]}")
    if metrics_without_times(reference_dir) != metrics_without_times(out_dir):
        problems.append("metrics.jsonl differs")
    return problems


def state_version(state_path):
    try:
        return os.stat(state_path).st_mtime_ns
    except FileNotFoundError:
        return None


def saving(out_dir):
    try:
        return any(".tmp." in name for name in os.listdir(out_dir))
    except FileNotFoundError:
        return False


def wait_for_the_kill(process, out_dir, run_seconds, rng):
    """Sleeps until a random kill point: a quarter anywhere in the first half of a run (start-up,
    evaluation, loading the state), a quarter among the training steps (after this process's first
    save, within the next few steps), and half while a save is under way (as soon as a temporary
    file shows in out_dir, plus up to 3 ms). Times scale with how long the uninterrupted run took,
    so a slow build (the sanitizers'), or mpirun's slower start, is killed at the same points of
    its run as a fast one."""
    mode = rng.random()
    if mode < 0.25:
        time.sleep(rng.uniform(0.05, 0.5) * run_seconds)
        return
    state_path = os.path.join(out_dir, "state.safetensors")
    before = state_version(state_path)
    deadline = time.monotonic() + run_seconds
    while process.poll() is None and time.monotonic() < deadline:
        if mode < 0.5 and state_version(state_path) != before:
            time.sleep(rng.uniform(0.0, 3.0) * run_seconds / STEPS)
            return
        if mode >= 0.5 and saving(out_dir):
            time.sleep(rng.uniform(0.0, 0.003))
            return
        time.sleep(0.0005)


def kill_and_resume(name, folio, data, work, launcher, kills, rng):
    reference_dir = os.path.join(work, name, "uninterrupted")
    out_dir = os.path.join(work, name, "killed")
    began = time.monotonic()
    run(train_command(folio, data, reference_dir, launcher))
    run_seconds = time.monotonic() - began
    killed, during_write, started = 0, 0, False
    # At least `kills` kills, and more (up to 3x) until one has landed inside a save.
    while killed < kills or (during_write == 0 and killed < 3 * kills):
        command = (resume_command(folio, out_dir, launcher) if started
                   else train_command(folio, data, out_dir, launcher))
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   env=environment(), start_new_session=True)
        started = True
        wait_for_the_kill(process, out_dir, run_seconds, rng)
        if process.poll() is not None:  # finished before the kill: start over from scratch
            if process.returncode != 0:
                return [f"a run ended with {process.returncode}: {process.stderr.read()[-500:]}"]
            shutil.rmtree(out_dir)
            started = False
            continue
        kill_tree(process.pid)
        process.wait()
        killed += 1
        if glob.glob(os.path.join(out_dir, ".*.tmp.*")):
            during_write += 1
        if not os.path.exists(os.path.join(out_dir, "state.safetensors")):
            started = False  # killed before the first save: nothing to resume yet
            shutil.rmtree(out_dir, ignore_errors=True)
    # the last kill may have come before the first save: then the run starts afresh
    run(resume_command(folio, out_dir, launcher) if started
        else train_command(folio, data, out_dir, launcher))
    problems = same_run(reference_dir, out_dir)
    if during_write == 0:
        problems.append("no kill landed inside a save; rerun (or raise KILLS)")
    print(f"{name}: {killed} kills, {during_write} during a save: "
          f"{'ok' if not problems else 'FAIL ' + '; '.join(problems)}")
    return problems


def stop_with_signals(folio, data, work):
    """SIGTERM once: a clean stop that resumes into the same run. SIGINT twice: death at once.

    Each scenario runs three times, the signal landing at different moments: one that landed
    inside one of oneDNN's products used to corrupt the heap about one time in three
    (core/signal_thread.h), so a single clean run would prove little."""
    problems = []
    reference_dir = os.path.join(work, "signals", "uninterrupted")
    run(train_command(folio, data, reference_dir, []))
    for attempt, delay in enumerate((0.7, 0.9, 1.1)):
        problems += stop_with_sigterm(folio, data, reference_dir,
                                      os.path.join(work, "signals", f"stopped{attempt}"), delay)
        problems += stop_with_two_sigints(folio, data,
                                          os.path.join(work, "signals", f"twice{attempt}"))
    problems += two_sigints_after_a_resume(folio, data, os.path.join(work, "signals", "resumed"))
    print(f"signals: {'ok' if not problems else 'FAIL ' + '; '.join(problems)}")
    return problems


def stop_with_sigterm(folio, data, reference_dir, out_dir, delay):
    problems = []
    process = subprocess.Popen(train_command(folio, data, out_dir, []), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=environment())
    time.sleep(delay)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    if process.returncode != 0:
        return [f"SIGTERM at {delay} s: exit code {process.returncode}: {stderr[-300:]!r}"]
    if f"resume with `folio train --resume {out_dir}`" not in stdout:
        problems.append(f"SIGTERM at {delay} s: no line saying how to resume")
    run(resume_command(folio, out_dir, []))
    return problems + same_run(reference_dir, out_dir)


def stop_with_two_sigints(folio, data, out_dir):
    # The second signal stops at once, without waiting for the step to end (steps of the
    # full-size model take most of a second here, so the first signal is still pending).
    process = subprocess.Popen([folio, "train", "--config", "shakespeare_char", "--data", data,
                                "--out_dir", out_dir, "--batch_size=16", "--eval_iters=1",
                                "--sample_tokens=0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=environment())
    # Signal once training runs (after step 0's evaluation and checkpoint).
    deadline = time.monotonic() + 60
    for line in process.stdout:
        if "val loss improved, saved" in line or time.monotonic() > deadline:
            break
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    time.sleep(0.1)  # two signals sent at once can merge into one pending signal
    process.send_signal(signal.SIGINT)
    problems = []
    try:
        _, stderr = process.communicate(timeout=5)
        # The first signal is acknowledged; the second ends the process at once with 130, not
        # by finishing the step, saving and exiting 0 or 1.
        if "folio: stopping after the current step to save the training state" not in stderr:
            problems.append(f"the first SIGINT was not acknowledged on stderr: {stderr[-300:]!r}")
        if process.returncode not in (-signal.SIGINT, 128 + signal.SIGINT):
            problems.append(f"after a second SIGINT the exit code is {process.returncode}, not "
                            f"death by SIGINT (-{int(signal.SIGINT)}) or {128 + signal.SIGINT}: "
                            f"{stderr[-300:]!r}")
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        problems.append("a second SIGINT did not stop the run at once")
    return problems


def two_sigints_after_a_resume(folio, data, out_dir):
    """A resumed run stopped at once: its message names the checkpoint of the earlier session
    (it said only the state, as if the folder held no model)."""
    command = [folio, "train", "--config", "shakespeare_char", "--data", data, "--out_dir",
               out_dir, "--batch_size=16", "--eval_iters=1", "--sample_tokens=0"]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=environment())
    for line in first.stdout:
        if "val loss improved, saved" in line:
            break
    first.send_signal(signal.SIGTERM)  # finishes its step, saves the state
    first.communicate(timeout=60)
    resumed = subprocess.Popen([folio, "train", "--resume", out_dir], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=environment())
    time.sleep(3)  # into its first steps
    resumed.send_signal(signal.SIGINT)
    time.sleep(0.1)
    resumed.send_signal(signal.SIGINT)
    try:
        _, stderr = resumed.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        kill_tree(resumed.pid)
        return ["two SIGINTs after a resume: still running"]
    if "the best model, of step 0, is in" not in stderr:
        return [f"two SIGINTs after a resume: no word of the checkpoint: {stderr[-400:]!r}"]
    return []


def stops_under_nproc(folio, data, work):
    """A `folio train --nproc 2` run stopped with Ctrl-C, and with its launcher killed outright,
    saves its state and resumes into the uninterrupted run."""
    reference_dir = os.path.join(work, "nproc", "uninterrupted")
    run(train_command(folio, data, reference_dir, []) + ["--nproc", "2"])
    problems = ctrl_c_under_nproc(folio, data, reference_dir, os.path.join(work, "nproc", "ctrl_c"))
    for attempt, step in enumerate((10, 45, 80)):
        problems += launcher_killed_outright(folio, data, reference_dir,
                                             os.path.join(work, "nproc", f"killed{attempt}"), step)
    print(f"stops under --nproc 2: {'ok' if not problems else 'FAIL ' + '; '.join(problems)}")
    return problems


def ctrl_c_under_nproc(folio, data, reference_dir, out_dir):
    """`folio train --nproc 2` in a terminal, Ctrl-C: the terminal sends SIGINT to the whole
    foreground process group. The ranks, in the launcher's group, got it from the terminal and
    again from the launcher, took the second for "stop at once" and exited 130 without saving;
    in a group of their own they get it once, from the launcher: the run stops after its step,
    saves its state and exits 0, and resumes into the uninterrupted run."""
    process = subprocess.Popen(train_command(folio, data, out_dir, []) + ["--nproc", "2"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=environment(), start_new_session=True)  # a terminal's job
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(out_dir, "state.safetensors")) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)  # what the terminal does
    try:
        stdout, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        kill_tree(process.pid)
        return ["Ctrl-C under --nproc 2: still running 60 s later"]
    if process.returncode != 0 or "interrupted after" not in stdout:
        return [f"Ctrl-C under --nproc 2: exit code {process.returncode}, "
                f"stderr {stderr[-400:]!r}"]
    run(resume_command(folio, out_dir, []) + ["--nproc", "2"])
    return same_run(reference_dir, out_dir)


def launcher_killed_outright(folio, data, reference_dir, out_dir, step):
    """The launcher of `folio train --nproc 2` killed with SIGKILL after `step` steps: its ranks
    get the parent-death signal, once per launcher thread that dies (twice, mostly: the signal
    thread outlives the main one); they took a second SIGTERM for "stop at once" and lost their
    state about two kills in three. Now they stop after their step and save it. The run saves
    only at exit (checkpoint_interval=0), so a state on disk is the stop's."""
    label = f"launcher killed outright after step {step}"
    command = [argument.replace("--checkpoint_interval=1", "--checkpoint_interval=0")
               for argument in train_command(folio, data, out_dir, [])] + ["--nproc", "2"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=environment(), start_new_session=True)
    metrics = os.path.join(out_dir, "metrics.jsonl")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with open(metrics) as f:
                if f"\"step\":{step}," in f.read().replace(" ", ""):
                    break
        except FileNotFoundError:
            pass
        time.sleep(0.01)
    ranks = children_of(process.pid)
    process.kill()
    try:  # the ranks hold the pipes: they close when the last rank ends
        stdout, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        for rank in ranks:
            kill_tree(rank)
        process.communicate()
        return [f"{label}: the ranks still ran 60 s later"]
    if "interrupted after" not in stdout or \
            not os.path.exists(os.path.join(out_dir, "state.safetensors")):
        return [f"{label}: no state saved: {stdout[-300:]!r} {stderr[-400:]!r}"]
    problems = resume_on_other_ranks_refused(folio, out_dir)
    run(resume_command(folio, out_dir, []) + ["--nproc", "2"])
    return problems + same_run(reference_dir, out_dir)


def resume_on_other_ranks_refused(folio, out_dir):
    """The ranks are a factor of the global batch (ranks x batch_size x grad_accum): a run of 2
    ranks resumed by one process went on with half its batch (and metrics.jsonl's token count went
    backwards), where a change of grad_accum is refused. Refused: one line, exit 2, the state
    untouched."""
    state = os.path.join(out_dir, "state.safetensors")
    before = safetensors_tensors(state)
    result = subprocess.run(resume_command(folio, out_dir, []), capture_output=True, text=True,
                            env=environment(), timeout=60)
    lines = result.stderr.strip().splitlines()
    if result.returncode != 2 or len(lines) != 1 or \
            "trained on 2 ranks and this one has 1 rank; resume it on 2 ranks" not in lines[0]:
        return [f"a 2-rank run resumed by one process: exit {result.returncode}, "
                f"stderr {result.stderr[-400:]!r}"]
    if safetensors_tensors(state) != before:
        return ["a refused resume on other ranks changed the state"]
    return []


def main(folio, data, work, kills="20"):
    shutil.rmtree(work, ignore_errors=True)
    rng = random.Random(20261122)
    failures = []
    failures += kill_and_resume("one process", folio, data, work, [], int(kills), rng)
    failures += kill_and_resume("two MPI ranks", folio, data, work, ["mpirun", "-np", "2"],
                                int(kills), rng)
    failures += stop_with_signals(folio, data, work)
    failures += stops_under_nproc(folio, data, work)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
