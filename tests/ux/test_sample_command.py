"""`folio sample` as a pipe sees it: stdout is the text alone (numbered, separated samples with
--num_samples, the same texts whatever --sample_batch), the speed goes to stderr, --prompt_file
gives what --prompt gives, and --window_shift 1 is the default (tiny's block_size of 16 is passed
within the 60 tokens).

    python3 test_sample_command.py FOLIO_BINARY DATA_FILE
"""

import os
import re
import subprocess
import sys

from recorded_run import check_errors, report, train_tiny


def sample(folio, checkpoint, *options):
    return subprocess.run([folio, "sample", "--ckpt", checkpoint, "--max_new_tokens", "60",
                           "--seed", "7", *options], capture_output=True, text=True, check=True)


def main(folio, data):
    run = train_tiny(folio, data, "tiny_sample")
    checkpoint = os.path.join(run, "ckpt.safetensors")
    prompt_file = os.path.join(run, "prompt.txt")
    with open(prompt_file, "w") as f:
        f.write("ROMEO:\nWhat")
    failures = []

    from_text = sample(folio, checkpoint, "--prompt", "ROMEO:\nWhat")
    from_file = sample(folio, checkpoint, "--prompt_file", prompt_file)
    if from_file.stdout != from_text.stdout or not from_text.stdout.startswith("ROMEO:\nWhat"):
        failures.append(f"--prompt_file {from_file.stdout!r} vs --prompt {from_text.stdout!r}")
    # Windows line endings read as the training text's did ("\r\n" is "\n"): the same text
    # follows the prompt (printed as given; text mode reads its "\r\n" back as "\n"). Read
    # byte for byte, "\r" is outside the vocabulary, and sample exits 2.
    crlf_file = os.path.join(run, "prompt_crlf.txt")
    with open(crlf_file, "wb") as f:
        f.write(b"ROMEO:\r\nWhat")
    from_crlf = sample(folio, checkpoint, "--prompt_file", crlf_file)
    if from_crlf.stdout != from_text.stdout:
        failures.append(f"a CRLF --prompt_file {from_crlf.stdout!r} vs {from_text.stdout!r}")
    if "---" in from_text.stdout or "tokens/s" in from_text.stdout:
        failures.append(f"one sample's stdout is not the text alone: {from_text.stdout!r}")
    if not re.fullmatch(r"sampled 60 tokens in [\d.]+ s: \d+ tokens/s\n", from_text.stderr):
        failures.append(f"speed on stderr: {from_text.stderr!r}")

    three = sample(folio, checkpoint, "--prompt", "ROMEO:", "--num_samples", "3")
    parts = re.split(r"^--- sample (\d) of 3 ---\n", three.stdout, flags=re.M)
    numbers, texts = parts[1::2], parts[2::2]
    if parts[0] != "" or numbers != ["1", "2", "3"]:
        failures.append(f"--num_samples 3 headers: {numbers} after {parts[0]!r}")
    if not all(text.startswith("ROMEO:") for text in texts) or len(set(texts)) != 3:
        failures.append(f"--num_samples 3 texts: {texts!r}")
    if not re.fullmatch(r"sampled 180 tokens in [\d.]+ s: \d+ tokens/s\n", three.stderr):
        failures.append(f"--num_samples 3 speed on stderr: {three.stderr!r}")
    # Drawn together (the default batch takes all 3) or one or two at a time, the same texts in
    # the same order: each text draws from its own random stream (fp32 here).
    for batch in ("1", "2"):
        batched = sample(folio, checkpoint, "--prompt", "ROMEO:", "--num_samples", "3",
                         "--sample_batch", batch)
        if batched.stdout != three.stdout:
            failures.append(f"--sample_batch {batch}: {batched.stdout!r} vs {three.stdout!r}")
    if sample(folio, checkpoint, "--prompt", "ROMEO:\nWhat", "--window_shift", "1").stdout != \
            from_text.stdout:
        failures.append("--window_shift 1 is not the default")
    whole_block = sample(folio, checkpoint, "--prompt", "ROMEO:\nWhat", "--window_shift", "16")
    if not whole_block.stdout.startswith("ROMEO:\nWhat") or \
            len(whole_block.stdout) != len(from_text.stdout):
        failures.append(f"--window_shift 16: {whole_block.stdout!r}")
    if sample(folio, checkpoint, "--quiet").stderr != "":
        failures.append("--quiet still writes to stderr")

    check_errors([
        ([folio, "sample", "--ckpt", checkpoint, "--prompt", "a", "--prompt_file", prompt_file],
         "give --prompt or --prompt_file, not both"),
        ([folio, "sample", "--ckpt", checkpoint, "--prompt_file", prompt_file + ".missing"],
         "give --prompt_file a file that holds the prompt"),
        ([folio, "sample", "--ckpt", checkpoint, "--window_shift", "17"],
         "--window_shift 17 is more than the model's block_size 16: give 1 to 16"),
    ], failures)
    return report(failures)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
