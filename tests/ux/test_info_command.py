"""`folio info` on a real checkpoint: text and --json agree with the file and the run.

    python3 test_info_command.py FOLIO_BINARY DATA_FILE
"""

import hashlib
import json
import os
import subprocess
import sys

from recorded_run import check_errors, report, train_tiny

# tiny (2 layers x 3 heads of 10 x 32 wide, block 16, biases, untied head) over 65 characters.
TINY_GROUPS = {"embeddings": 65 * 32 + 16 * 32,
               "attention": 2 * (3 * 30 * 32 + 32 * 30 + 32),
               "feed-forward": 2 * (128 * 32 + 128 + 32 * 128 + 32),
               "norms": 2 * 4 * 32 + 2 * 32,
               "head": 65 * 32 + 65}


def main(folio, data):
    run = train_tiny(folio, data, "tiny_info")
    checkpoint = os.path.join(run, "ckpt.safetensors")
    failures = []

    info = json.loads(subprocess.run([folio, "info", checkpoint, "--json"], capture_output=True,
                                     text=True, check=True).stdout)
    expected = {
        "file": checkpoint,
        "file_size": os.path.getsize(checkpoint),
        "file_sha256": hashlib.sha256(open(checkpoint, "rb").read()).hexdigest(),
        "written_by_folio": True,
        "preset": "tiny with max_iters = 200",
        "parameters": 29505,
        "parameter_groups": TINY_GROUPS,
        "vocab_size": 65,
    }
    for key, value in expected.items():
        if info.get(key) != value:
            failures.append(f"--json {key}: {info.get(key)!r}, expected {value!r}")
    if sum(TINY_GROUPS.values()) != 29505:
        failures.append("the test's own group sizes do not add up")
    if info.get("step") not in (150, 199) or not 0 < info.get("val_loss", 0) < 4.2:
        failures.append(f"--json step {info.get('step')} / val_loss {info.get('val_loss')}")
    if info.get("config", {}).get("n_layer") != 2 or len(info.get("data_sha256") or "") != 64:
        failures.append("--json config or data_sha256")
    if not info.get("vocabulary", "").startswith("\n !"):
        failures.append(f"--json vocabulary {info.get('vocabulary', '')[:10]!r}")

    # The vocabulary padding (rows 65 to 127 of the token embedding and lm_head, never saved) is
    # no parameter: the same count and groups as without it (it had added 2 x 63 x 32 + 63).
    padded = os.path.join(train_tiny(folio, data, "tiny_padded", "--vocab_padding=128"),
                          "ckpt.safetensors")
    padded_info = json.loads(subprocess.run([folio, "info", padded, "--json"],
                                            capture_output=True, text=True, check=True).stdout)
    if padded_info.get("parameters") != 29505 or \
            padded_info.get("parameter_groups") != TINY_GROUPS:
        failures.append(f"with vocab_padding 128: parameters {padded_info.get('parameters')}, "
                        f"groups {padded_info.get('parameter_groups')}")

    text = subprocess.run([folio, "info", checkpoint], capture_output=True, text=True,
                          check=True).stdout
    for line in [f"file         {checkpoint}",
                 f"sha256       {expected['file_sha256']} ",
                 "preset       tiny with max_iters = 200",
                 "model        2 layers x 3 heads x 32 wide (head size 10), block 16, relu, biases",
                 "parameters   29,505 (0.029505 M)",
                 "  feed-forward       16,704   56.6%",
                 "vocabulary   65 characters: \\n !$&',-.3:;?ABC",
                 "  n_head = 3"]:
        if line not in text:
            failures.append(f"text lacks {line!r}")

    check_errors([
        ([folio, "info"], "needs a checkpoint"),
        ([folio, "info", os.path.join(run, "none.safetensors")], "does not exist"),
        ([folio, "info", checkpoint, checkpoint], "takes one checkpoint"),
    ], failures)
    return report(failures)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
