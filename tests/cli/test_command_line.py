"""A command line with no silent traps: stray arguments, help and --version, exit codes, errors
reported together, eval without --data, the training state given as a checkpoint, resumes with
nothing to do, --max_iters=0, --init_from mismatches, a one-character text, a second Ctrl-C, the
thread count of a rank that shares the machine, and `--nproc` checking the command before it
starts any rank.

    python3 test_command_line.py FOLIO_BINARY DATA_FILE
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from test_bad_input import rewrite_header, sha256

FAILURES = []


def check(name, condition, detail=""):
    print(f"{name}: {'ok' if condition else 'FAIL'}" + (f"\n    {detail}" if not condition else ""))
    if not condition:
        FAILURES.append(name)


def run(folio, *args, cwd=None, env=None):
    return subprocess.run([folio, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=600)


def error_lines(result):
    return [line for line in result.stderr.splitlines() if line.startswith("folio: error: ")]


def rewrite_config(source, target, edit):
    """Copies a folio checkpoint, letting `edit` change the config JSON in its metadata."""
    def edit_header(header):
        config = json.loads(header["__metadata__"]["config"])
        edit(config)
        header["__metadata__"]["config"] = json.dumps(config)
    rewrite_header(source, target, edit_header)


def main(folio, data):
    folio = os.path.abspath(folio)
    work = tempfile.mkdtemp(prefix="folio_command_line_")
    # The first 50,000 characters: an eval over the whole text stays quick on a busy machine.
    with open(data, encoding="utf-8") as f:
        text = f.read(50000)
    data = os.path.join(work, "input.txt")
    with open(data, "w", encoding="utf-8") as f:
        f.write(text)
    quick = ["--config", "tiny", "--eval_iters=1", "--sample_tokens=0", "--quiet"]
    run_dir = os.path.join(work, "run")
    trained = run(folio, "train", "--data", data, "--out_dir", run_dir, "--max_iters=3", *quick)
    assert trained.returncode == 0, trained.stderr
    ckpt = os.path.join(run_dir, "ckpt.safetensors")
    state = os.path.join(run_dir, "state.safetensors")

    # -- stray positional arguments: refused by every subcommand, with exit code 2
    sample = run(folio, "sample", "--ckpt", ckpt, "ROMEO:")
    check("sample rejects a stray prompt and suggests --prompt",
          sample.returncode == 2 and "unexpected argument 'ROMEO:'" in sample.stderr
          and "--prompt 'ROMEO:'" in sample.stderr and sample.stdout == "",
          f"rc {sample.returncode}, stderr {sample.stderr!r}")
    for command in (["eval", "--ckpt", ckpt], ["bench", "--config", "tiny"],
                    ["train", "--data", data], ["info", ckpt]):
        result = run(folio, *command, "stray")
        check(f"{command[0]} rejects a stray argument",
              result.returncode == 2 and "'stray'" in result.stderr,
              f"rc {result.returncode}, stderr {result.stderr!r}")

    # -- bench prints one JSON line; its memory figures split the program's own from the step's
    bench = run(folio, "bench", "--config", "tiny", "--device", "cpu", "--steps", "2",
                "--warmup", "0")
    try:
        figures = json.loads(bench.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        figures = {}
    check("bench reports peak_rss_mib above rss_before_backend_mib, both positive",
          bench.returncode == 0 and figures.get("rss_before_backend_mib", 0) > 0
          and figures.get("peak_rss_mib", 0) > figures["rss_before_backend_mib"],
          f"rc {bench.returncode}, stdout {bench.stdout[-300:]!r}")
    check("a quick bench writes nothing on stderr", bench.stderr == "", f"stderr {bench.stderr!r}")
    # ... and says at once when a step is several micro-batches (gpt2's: 128, minutes on a CPU)
    accumulated = run(folio, "bench", "--config", "tiny", "--device", "cpu", "--steps", "1",
                      "--warmup", "0", "--grad_accum=3")
    check("bench names a step's micro-batches and how to time one",
          accumulated.returncode == 0 and "is 3 micro-batches (grad_accum) of 16 x 16 tokens"
          in accumulated.stderr and "--grad_accum=1 times one micro-batch" in accumulated.stderr,
          f"rc {accumulated.returncode}, stderr {accumulated.stderr!r}")

    # --profile's shares are of the mean step, as its rows are means: "outside the ops" cannot be
    # negative (of the median step, a slow first step made it -2800%)
    profiled = run(folio, "bench", "--config", "tiny", "--device", "cpu", "--threads", "1",
                   "--steps", "3", "--warmup", "0", "--profile")
    outside = [line for line in profiled.stdout.splitlines() if line.startswith("| outside")]
    check("bench --profile: the time outside the ops is not negative",
          profiled.returncode == 0 and len(outside) == 1 and
          float(outside[0].split("|")[3]) >= 0, f"rc {profiled.returncode}, {outside}")
    ladder = run(folio, "bench", "--ladder", "--dtype", "bf16", "--profile")
    check("bench --ladder refuses the options it would override",
          ladder.returncode == 2 and "--ladder sets dtype rung by rung" in ladder.stderr and
          "--profile one" in ladder.stderr, ladder.stderr)

    # -- help for every subcommand, three ways; --version names the build
    for command in ("train", "eval", "sample", "bench", "plot", "info", "tokenize", "tokenizer",
                    "prepare", "import", "export"):
        for args in ([command, "-h"], [command, "--help"], ["help", command]):
            result = run(folio, *args)
            check(f"folio {' '.join(args)}",
                  result.returncode == 0 and result.stdout.startswith(f"usage: folio {command}"),
                  f"rc {result.returncode}, stdout {result.stdout[:80]!r}")
    for args in (["help", "tokenizer", "train"], ["help", "help"]):
        result = run(folio, *args)
        check(f"folio {' '.join(args)}", result.returncode == 0 and "usage: folio" in result.stdout,
              f"rc {result.returncode}, stdout {result.stdout[:80]!r}")
    extra = run(folio, "help", "sample", "extra")
    check("folio help takes one command", extra.returncode == 2 and "'extra' is another" in
          extra.stderr, f"rc {extra.returncode}, stderr {extra.stderr!r}")
    version = run(folio, "--version")
    check("--version prints the version and the build",
          version.returncode == 0 and version.stdout.startswith("folio ")
          and all(f in version.stdout for f in ("backends: cpu", "cpu sgemm:", "cuda:",
                                                "communicators:")),
          version.stdout)

    # -- usage errors exit 2, all reported at once, numbers in their shortest form
    many = run(folio, "sample", "--ckpt", ckpt, "--top_k=abc", "--temperature=-1",
               "--bogus_option=1", "stray")
    lines = error_lines(many)
    check("independent errors are all reported, one line each",
          many.returncode == 2 and len(lines) == 4
          and any("--top_k" in l for l in lines) and any("--temperature" in l for l in lines)
          and any("--bogus_option" in l for l in lines) and any("'stray'" in l for l in lines),
          many.stderr)
    check("ranges are printed without 1000000.000000",
          "[0, 1e+06]" in many.stderr and "000000" not in many.stderr, many.stderr)
    for args in (["eval", "--ckpt", ckpt, "--bogus=1"], ["eval", "--ckpt", ckpt, "--split=all"],
                 ["eval", "--ckpt", ckpt, "--max_windows=0"], ["bench", "--steps=0"],
                 ["plot", run_dir, "--width=1"], ["train", "--batch_size=lots"],
                 ["info", ckpt, "--json=maybe"], ["sample"],
                 ["sample", "--ckpt", ckpt, "--window_shift=100000"],
                 ["sample", "--ckpt", ckpt, "--prompt", "\u00e9\u00e9"]):
        result = run(folio, *args)
        check(f"usage error exits 2: folio {' '.join(args[:1])} ... {args[-1]}",
              result.returncode == 2 and len(error_lines(result)) >= 1,
              f"rc {result.returncode}, stderr {result.stderr!r}")
    flag = run(folio, "info", ckpt, "--json=maybe")
    check("a boolean's error names exactly the words it takes",
          "true or false (also 1/0, yes/no, on/off)" in flag.stderr, flag.stderr)
    yes = run(folio, "info", ckpt, "--json=yes")
    check("a boolean takes the words its error names", yes.returncode == 0
          and yes.stdout.startswith("{"), yes.stderr)

    # -- eval without --data: the checkpoint first, its recorded text, no fetch, no leftovers
    empty_cwd = os.path.join(work, "cwd")
    os.makedirs(empty_cwd)
    no_curl = dict(os.environ, PATH=os.path.join(work, "no_programs_here"))
    not_a_ckpt = os.path.join(work, "notes.txt")
    with open(not_a_ckpt, "w") as f:
        f.write("not a checkpoint\n")
    bad = run(folio, "eval", "--ckpt", not_a_ckpt, cwd=empty_cwd, env=no_curl)
    check("eval reads the checkpoint before fetching any text",
          bad.returncode == 1 and "fetching" not in bad.stderr
          and not os.path.exists(os.path.join(empty_cwd, "data")), bad.stderr)
    recorded = run(folio, "eval", "--ckpt", ckpt, "--quiet", cwd=empty_cwd, env=no_curl)
    check("eval uses the text the checkpoint records",
          recorded.returncode == 0 and "val_loss" in recorded.stdout
          and not os.path.exists(os.path.join(empty_cwd, "data")), recorded.stderr)
    no_text = os.path.join(work, "no_text.safetensors")
    rewrite_config(ckpt, no_text, lambda config: config.update(data=""))
    fetch = run(folio, "eval", "--ckpt", no_text, cwd=empty_cwd, env=no_curl)
    check("a failed fetch leaves no empty data/ folder behind",
          fetch.returncode == 1 and "no training text" in fetch.stderr
          and not os.path.exists(os.path.join(empty_cwd, "data")),
          f"{fetch.stderr!r}; left {os.listdir(empty_cwd)}")

    # -- the training state is recognised and pointed to ckpt.safetensors / --resume
    for args in (["info", state], ["eval", "--ckpt", state], ["sample", "--ckpt", state]):
        result = run(folio, *args, cwd=empty_cwd, env=no_curl)
        check(f"{args[0]} recognises state.safetensors",
              result.returncode == 1 and "training state" in result.stderr
              and "--resume" in result.stderr and "ckpt.safetensors" in result.stderr
              and "not written by folio" not in result.stderr and "fetching" not in result.stderr,
              result.stderr)

    # -- resuming with nothing left to do says so and changes nothing
    before = sha256(state)
    for extra in ([], ["--max_iters=2"], ["--max_iters=3"]):
        result = run(folio, "train", "--resume", run_dir, *extra)
        check(f"--resume {' '.join(extra) or '(finished run)'}: nothing to do",
              result.returncode == 0 and "nothing to do" in result.stdout
              and "trained" not in result.stdout and "has done 3 steps" in result.stdout,
              result.stdout + result.stderr)
    check("a resume with nothing to do leaves the state as it was", sha256(state) == before)

    # -- --max_iters=0 names no checkpoint it never wrote
    zero_dir = os.path.join(work, "zero")
    zero = run(folio, "train", "--data", data, "--out_dir", zero_dir, "--max_iters=0", *quick)
    check("--max_iters=0 says no checkpoint was written",
          zero.returncode == 0 and "no checkpoint was written" in zero.stdout
          and "checkpoint " + os.path.join(zero_dir, "ckpt.safetensors") not in zero.stdout
          and not os.path.exists(os.path.join(zero_dir, "ckpt.safetensors")), zero.stdout)

    # -- a resume whose folder lacks this run's best model: deleted, emptied, or another run's (a
    #    folder reused with --overwrite and stopped before its first evaluation). A warning says
    #    so, and the next evaluation writes this run's model, where the run had gone on beating
    #    the missing model's val loss and ended naming a file that held none or another's.
    for case in ("deleted", "emptied", "another"):
        folder = os.path.join(work, "lost_" + case)
        shutil.copytree(run_dir, folder)
        lost = os.path.join(folder, "ckpt.safetensors")
        seed = "1337"
        if case == "deleted":
            os.remove(lost)
        elif case == "emptied":
            open(lost, "w").close()
        else:
            seed = "7"
            again = run(folio, "train", "--data", data, "--out_dir", folder, "--overwrite",
                        "--max_iters=0", "--seed", seed, *quick)
            assert again.returncode == 0, again.stderr
        resumed = run(folio, "train", "--resume", folder, "--max_iters=5", "--quiet")
        written = run(folio, "info", lost, "--json")
        facts = json.loads(written.stdout) if written.returncode == 0 else {}
        check(f"a resume whose checkpoint is {case} warns and writes this run's",
              resumed.returncode == 0 and "does not hold this run's best model" in resumed.stderr
              and facts.get("step") == 4 and str(facts.get("config", {}).get("seed")) == seed,
              f"rc {resumed.returncode}, stderr {resumed.stderr!r}, info {written.stdout[:200]!r}")
    kept = os.path.join(work, "kept")
    shutil.copytree(run_dir, kept)
    resumed = run(folio, "train", "--resume", kept, "--max_iters=5", "--quiet")
    check("a resume whose checkpoint is its own warns of nothing",
          resumed.returncode == 0 and "warning" not in resumed.stderr, resumed.stderr)

    # -- --overwrite with a resume in the run's own folder does nothing: refused, not ignored
    both = run(folio, "train", "--resume", run_dir, "--overwrite", "--max_iters=5")
    check("--overwrite with --resume DIR is refused",
          both.returncode == 2 and "--overwrite does nothing with --resume" in both.stderr,
          both.stderr)

    # -- --init_from without --config takes the checkpoint's model, recipe and run keys, not its
    #    host keys: its out_dir would have had the run replace the checkpoint it starts from
    printed = run(folio, "train", "--init_from", ckpt, "--print_config")
    lines = set(printed.stdout.splitlines())
    check("--init_from takes the checkpoint's run keys but not its out_dir or data",
          printed.returncode == 0 and "max_iters = 3" in lines and "n_embd = 32" in lines
          and "out_dir = out" in lines and "data = " in lines, printed.stdout + printed.stderr)

    # -- a run's folder given to --init_from: told to give the checkpoint in it (it had been read
    #    as a Hugging Face folder lacking config.json)
    folder = run(folio, "train", "--init_from", run_dir, "--max_iters=1")
    check("--init_from of a run's folder names the checkpoint in it",
          folder.returncode == 2 and "is a run's folder: give the checkpoint in it, " + ckpt
          in folder.stderr, folder.stderr)

    # -- --init_from mismatches name the part that differs
    other = os.path.join(work, "other")
    shape = run(folio, "train", "--data", data, "--out_dir", other, "--max_iters=1",
                "--block_size=8", "--init_from", ckpt, *quick)
    check("--init_from names the tensor whose shape differs, with both shapes",
          shape.returncode == 2
          and "position_embedding_table.weight is [16, 32] in the checkpoint but [8, 32]"
          in shape.stderr and "drop the model keys" in shape.stderr
          and len(shape.stderr.strip().splitlines()) == 1, shape.stderr)
    wider_text = os.path.join(work, "wider.txt")
    with open(wider_text, "w", encoding="utf-8") as f:
        f.write(text + "\u00eb \u20ac\n")
    vocab = run(folio, "train", "--data", wider_text, "--out_dir", other, "--max_iters=1",
                "--init_from", ckpt, *quick)
    check("--init_from names the characters the checkpoint's vocabulary lacks",
          vocab.returncode == 1 and "has the character '\u00eb'" in vocab.stderr
          and "nor is 1 other: '\u20ac'" in vocab.stderr
          and len(vocab.stderr.strip().splitlines()) == 1, vocab.stderr)
    # A text of some of its characters is read with the checkpoint's vocabulary: it finetunes.
    part_text = os.path.join(work, "part.txt")
    with open(part_text, "w", encoding="utf-8") as f:
        f.write(text[:2000])
    part = run(folio, "train", "--data", part_text, "--out_dir", os.path.join(work, "part"),
               "--max_iters=1", "--init_from", ckpt, *quick)
    check("--init_from finetunes on a text of some of the checkpoint's characters",
          part.returncode == 0, part.stderr)

    # -- a text of one distinct character: a warning that there is nothing to learn
    same = os.path.join(work, "same.txt")
    with open(same, "w") as f:
        f.write("a" * 3000)
    one = run(folio, "train", "--data", same, "--out_dir", os.path.join(work, "one"),
              "--max_iters=1", *quick)
    check("a one-character text warns that there is nothing to learn",
          one.returncode == 0 and "folio: warning:" in one.stderr
          and "nothing to learn" in one.stderr, one.stderr)

    # -- a second Ctrl-C: exit 130, saying what was saved and what was not
    stop_dir = os.path.join(work, "stop")
    process = subprocess.Popen(
        [folio, "train", "--data", data, "--out_dir", stop_dir, "--max_iters=1000000",
         "--eval_interval=1000000", "--checkpoint_interval=0", "--log_interval=1",
         "--config", "tiny", "--batch_size=1024", "--eval_iters=1", "--sample_tokens=0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Wait for the first checkpoint (the evaluation at step 0) and a training step; then the
    # first signal, and the second as soon as the first has been seen (signals sent together
    # would merge into one). A step of batch 1024 outlasts that wait.
    seen = ""
    while "iter " not in seen and process.poll() is None:
        seen += process.stdout.readline()
    process.send_signal(signal.SIGINT)
    process.stderr.readline()  # the blank line before the message
    process.stderr.readline()  # "folio: stopping after the current step ..."
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=300)
    check("a second Ctrl-C exits 130 and says what is saved",
          process.returncode == 130 and "stopped at once by a second signal" in stderr
          and "the best model, of step 0, is in " + os.path.join(stop_dir, "ckpt.safetensors")
          in stderr
          and ("no training state was saved" in stderr or "the training state after step"
               in stderr), f"rc {process.returncode}, stderr {stderr!r}")

    # -- a rank that shares the machine with another rank of its job takes half the cores
    cores = len(os.sched_getaffinity(0))
    shared = run(folio, "train", "--data", data, "--out_dir", os.path.join(work, "ranks"),
                 "--max_iters=1", *quick,
                 env=dict(os.environ, LOCAL_WORLD_SIZE="2", OMP_WAIT_POLICY="passive"))
    expected = f"device cpu ({max(1, cores // 2)} threads"
    check("a rank sharing the machine with another takes cores / local ranks threads",
          shared.returncode == 0 and expected in shared.stdout,
          f"expected {expected!r} in {shared.stdout!r}")

    # -- `train --nproc 2` checks the whole command before it starts any rank: each rank had
    # printed the mistake, then the launcher its exit code and that it stopped the others
    def refused_once(result, expected):
        lines = result.stderr.strip().splitlines()
        return (len(lines) == 1 and lines[0].startswith("folio: error: ") and expected in lines[0]
                and "We have 2 ranks" not in result.stdout)

    nproc = ["train", "--nproc", "2", "--data", data, "--max_iters=1", *quick]
    mistake = run(folio, *nproc, "--out_dir", os.path.join(work, "nproc"), "--lerning_rate=1")
    check("--nproc 2: a usage error is one line, exit 2, before any rank starts",
          mistake.returncode == 2 and refused_once(mistake, "unknown option --lerning_rate"),
          f"rc {mistake.returncode}, stdout {mistake.stdout!r}, stderr {mistake.stderr!r}")
    printed = run(folio, *nproc, "--print_config")
    check("--nproc 2 --print_config prints the config once",
          printed.returncode == 0 and printed.stdout.count("n_layer = ") == 1
          and "We have" not in printed.stdout, f"rc {printed.returncode}, {printed.stdout!r}")
    other_ranks = run(folio, "train", "--resume", run_dir, "--nproc", "2")
    check("--nproc 2 resuming a run of one process: one line, exit 2",
          other_ranks.returncode == 2 and refused_once(
              other_ranks, "trained on 1 rank and this one has 2 ranks"),
          f"rc {other_ranks.returncode}, stderr {other_ranks.stderr!r}")
    for launcher, variables in [("torchrun-style environment", {"RANK": "0", "WORLD_SIZE": "2"}),
                                ("mpirun", {"OMPI_COMM_WORLD_SIZE": "2",
                                            "OMPI_COMM_WORLD_RANK": "0"})]:
        # (a short dist_timeout: not refused, the one rank would wait at the rendezvous)
        under_launcher = run(folio, *nproc, "--out_dir", os.path.join(work, "nproc"),
                             "--dist_timeout=5", env=dict(os.environ, **variables))
        check(f"--nproc 2 under {launcher} is refused (it was ignored)",
              under_launcher.returncode == 2 and refused_once(
                  under_launcher, f"already rank 0 of 2 started by {launcher}: drop --nproc"),
              f"rc {under_launcher.returncode}, stderr {under_launcher.stderr!r}")

    # -- the --nproc launcher's ranks take their share of the cores without saving it in the run's
    # config (it had added --threads=N to their command lines, which a resume on another machine
    # or number of ranks then inherited)
    ranks_dir = os.path.join(work, "nproc_threads")
    ranks = run(folio, *nproc, "--out_dir", ranks_dir)
    resumed_config = run(folio, "train", "--resume", ranks_dir, "--nproc", "2", "--print_config")
    check("--nproc 2: each rank takes cores / 2 threads, and the config keeps threads = 0",
          ranks.returncode == 0 and expected in ranks.stdout
          and "threads = 0\n" in resumed_config.stdout,
          f"expected {expected!r} in {ranks.stdout!r}; {resumed_config.stdout[-300:]!r}")

    # ... and waits passively (OpenMP reads OMP_WAIT_POLICY at start: folio runs itself again)
    environment = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}

    def wait_policy_of(extra_environment):
        process = subprocess.Popen([folio, "bench", "--config", "tiny", "--steps", "1000000"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env=dict(environment, **extra_environment))
        policy = b""
        for _ in range(100):
            try:
                with open(f"/proc/{process.pid}/environ", "rb") as f:
                    policy = next((v for v in f.read().split(b"\0")
                                   if v.startswith(b"OMP_WAIT_POLICY=")), b"")
            except OSError:
                pass
            if policy:
                break
            time.sleep(0.1)
        process.kill()
        process.wait()
        return policy

    policy = wait_policy_of({"LOCAL_WORLD_SIZE": "2"})
    check("a rank sharing the machine waits passively", policy == b"OMP_WAIT_POLICY=passive",
          f"the process's environment holds {policy!r}")

    # ... as does a lone folio on a machine whose every core is running something else now
    spinners = [subprocess.Popen(["sh", "-c", "while :; do :; done"])
                for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.2)
        policy = wait_policy_of({})
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    check("a lone folio on a machine busy now waits passively",
          policy == b"OMP_WAIT_POLICY=passive", f"the process's environment holds {policy!r}")

    print(f"{len(FAILURES)} failed: {FAILURES}" if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
