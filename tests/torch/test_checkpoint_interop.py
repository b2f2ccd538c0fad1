"""Checkpoints cross between folio and PyTorch, both ways.

  1. folio trains `tiny` (and `seed004`) briefly; PyTorch loads its checkpoint into the seed's
     model (seed 004's AttentionModel) with load_state_dict (strict but for the `tril` buffers)
     and its loss over every consecutive window of each split equals `folio eval`'s to 1e-5.
  2. PyTorch builds the seed's model, saves model.state_dict() with safetensors.torch.save_file;
     folio evaluates that file with the same loss to 1e-5, samples from it, and trains from it
     at learning rate 0, whose checkpoint must again give PyTorch's loss (the weights were used).
  3. The same for seed 004's AttentionModel saved by PyTorch (evaluation).

    python3 test_checkpoint_interop.py FOLIO_BINARY DATA_FILE WORK_DIR
"""

import json
import os
import shutil
import subprocess
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import folio_torch  # noqa: E402
import seed004_model  # noqa: E402

TOLERANCE = 1e-5


def run(*args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"command failed ({result.returncode}): {' '.join(args)}\n{result.stderr}")
    return result.stdout


def close(a, b):
    return abs(a - b) <= TOLERANCE * abs(b)


def main(folio, data, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failures = []

    # 1. folio -> PyTorch (seed 000's model, and seed 004's in its own module)
    for preset in ("tiny", "seed004"):
        out_dir = os.path.join(work, "run_" + preset)
        run(folio, "train", "--config", preset, "--data", data, "--out_dir", out_dir,
            "--max_iters=60", "--eval_interval=30", "--eval_iters=5", "--sample_tokens=0")
        ckpt = os.path.join(out_dir, "ckpt.safetensors")
        folio_eval = json.loads(run(folio, "eval", "--ckpt", ckpt, "--data", data))
        tool = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "folio_torch.py")
        torch_eval = json.loads(run(sys.executable, tool, ckpt, "--data", data))
        for split in ("train_loss", "val_loss"):
            if not close(folio_eval[split], torch_eval[split]):
                failures.append(f"folio {preset} checkpoint: {split} folio {folio_eval[split]} "
                                f"torch {torch_eval[split]}")
        print(f"folio {preset} checkpoint in PyTorch:", folio_eval, torch_eval)

    # 2. PyTorch -> folio
    text = folio_torch.read_text(data)
    vocab = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(vocab)}
    tokens = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(tokens))
    cfg = {"n_embd": 48, "n_head": 4, "n_layer": 2, "block_size": 32, "dropout": 0.0,
           "bias": True, "activation": "relu", "tie_weights": False}
    torch.manual_seed(1337)
    model = folio_torch.GPTLanguageModel(cfg, len(vocab))
    with torch.no_grad():  # move away from the init so that every tensor matters
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.eval()
    torch_file = os.path.join(work, "from_torch.safetensors")
    save_file(model.state_dict(), torch_file)
    expected = {"train_loss": folio_torch.split_loss(model, tokens[:n], cfg["block_size"]),
                "val_loss": folio_torch.split_loss(model, tokens[n:], cfg["block_size"])}
    got = json.loads(run(folio, "eval", "--ckpt", torch_file, "--data", data))
    for split in ("train_loss", "val_loss"):
        if not close(got[split], expected[split]):
            failures.append(f"PyTorch file: {split} folio {got[split]} torch {expected[split]}")
    print("PyTorch file in folio:", got, expected)
    # One split, its first windows: the loss of the first 50 windows of val (50 T + 1 tokens),
    # in batches of 8 (the last one partial); its keys alone.
    T = cfg["block_size"]
    part = json.loads(run(folio, "eval", "--ckpt", torch_file, "--data", data, "--split", "val",
                          "--max_windows", "50", "--batch_size", "8", "--quiet"))
    part_expected = folio_torch.split_loss(model, tokens[n:][:50 * T + 1], T)
    if sorted(part) != ["block_size", "val_loss", "val_windows"] or part["val_windows"] != 50 \
            or not close(part["val_loss"], part_expected):
        failures.append(f"eval --split val --max_windows 50: {part}, torch {part_expected}")

    sample = run(folio, "sample", "--ckpt", torch_file, "--data", data, "--max_new_tokens", "50",
                 "--seed", "5")
    if len(sample) < 50 or sample != run(folio, "sample", "--ckpt", torch_file, "--data", data,
                                         "--max_new_tokens", "50", "--seed", "5"):
        failures.append("sampling from the PyTorch file is not deterministic or too short")
    # Training from it: with learning rate 0 AdamW leaves every weight as it was
    # (w (1 - lr wd) - lr m / (sqrt(v) + eps) = w), so the checkpoint the run writes must give
    # PyTorch's losses: the file's weights were loaded and trained on, not a fresh init.
    trained_dir = os.path.join(work, "from_torch_run")
    run(folio, "train", "--data", data, "--init_from", torch_file, "--n_embd=48", "--n_head=4",
        "--n_layer=2", "--block_size=32", "--dropout=0", "--batch_size=4", "--max_iters=2",
        "--eval_interval=1", "--eval_iters=2", "--learning_rate=0", "--weight_decay=0.1",
        "--sample_tokens=0", "--out_dir", trained_dir)
    trained = json.loads(run(folio, "eval", "--ckpt", os.path.join(trained_dir, "ckpt.safetensors"),
                             "--data", data))
    for split in ("train_loss", "val_loss"):
        if not close(trained[split], expected[split]):
            failures.append(f"training from the PyTorch file: {split} of its checkpoint "
                            f"{trained[split]}, the PyTorch model's {expected[split]}")
    print("trained from the PyTorch file (lr 0):", trained)

    # 3. seed 004's own AttentionModel, as its notebook builds it (PyTorch's default init), saved
    #    by PyTorch: folio reads its structure and names off the tensors (torch_names = seed004).
    torch.manual_seed(1337)
    notebook = seed004_model.AttentionModel(block_size=16, vocab_size=len(vocab), num_heads=3,
                                            hidden_size=32, num_blocks=2, dropout=0.2)
    notebook.eval()
    notebook_file = os.path.join(work, "from_seed004.safetensors")
    save_file(notebook.state_dict(), notebook_file)
    expected = {"train_loss": folio_torch.split_loss(notebook, tokens[:n], 16),
                "val_loss": folio_torch.split_loss(notebook, tokens[n:], 16)}
    got = json.loads(run(folio, "eval", "--ckpt", notebook_file, "--data", data))
    for split in ("train_loss", "val_loss"):
        if not close(got[split], expected[split]):
            failures.append(f"seed 004 PyTorch file: {split} folio {got[split]} torch {expected[split]}")
    print("seed 004's PyTorch file in folio:", got, expected)

    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
