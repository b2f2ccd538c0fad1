"""folio import --hf / folio export --hf against GPT-2 as Hugging Face computes it.

  test_hf_gpt2.py FOLIO FORWARD_DUMP DATA.txt WORKDIR

CI has no PyTorch 2.x and so no current transformers: the GPT-2 folders are made with numpy +
safetensors in HF's exact layout, and gpt2_reference.py computes GPT2LMHeadModel's forward in
Debian's torch 1.13 (tools/hf_roundtrip.py does the same round trip with transformers itself).
  1. import: folio's logits and loss of the imported checkpoint equal the reference's (fp32,
     relative 1e-5), greedy continuations are the same tokens;
  2. export of that checkpoint: every tensor byte for byte the original's, config.json and the
     tokenizer beside it;
  3. a model folio trained (nanoGPT's structure) exported: the reference computes from the
     exported folder what folio computes from its checkpoint;
  4. what folio cannot express is refused with one clear line naming the key or tensor.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

FOLIO, DUMP, DATA, WORK = sys.argv[1:5]
failures = []
KEYS = subprocess.run([FOLIO, "train", "--help"], capture_output=True, text=True).stdout


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(*args):
    return subprocess.run([FOLIO, *args], capture_output=True, text=True)


def folio_outputs(checkpoint, ids, prompt, new_tokens):
    out = os.path.join(WORK, "dump.safetensors")
    subprocess.run([DUMP, "--ckpt", checkpoint, "--ids", ",".join(map(str, ids)),
                    "--prompt_ids", ",".join(map(str, prompt)), "--new_tokens", str(new_tokens),
                    "--out", out], check=True)
    d = load_file(out)
    return (torch.from_numpy(d["logits"][0]), float(d["loss"][0]),
            [int(x) for x in d["generated"]])


def compare(name, config, tensors, checkpoint, ids, prompt):
    """folio on `checkpoint` against the reference on (config, tensors)."""
    logits, loss, generated = folio_outputs(checkpoint, ids, prompt, 12)
    ref_logits, ref_loss = ref.loss(config, tensors, ids)
    error = float((logits - ref_logits).abs().max() / ref_logits.abs().max())
    check(error <= 1e-5, f"{name}: logits relative error {error:.2e} <= 1e-5")
    loss_error = abs(loss - float(ref_loss)) / float(ref_loss)
    check(loss_error <= 1e-5, f"{name}: loss {loss:.6f} vs {float(ref_loss):.6f}, "
          f"relative {loss_error:.1e} <= 1e-5")
    ref_generated = ref.greedy(config, tensors, prompt, 12)
    check(generated == ref_generated, f"{name}: greedy tokens {generated[len(prompt):]} == "
          f"reference {ref_generated[len(prompt):]}")
    # A continuation of one repeated token would prove little.
    check(len(set(ref_generated[len(prompt):])) > 2, f"{name}: the greedy continuation varies")


def sample_matches_reference(checkpoint, folder, config, tensors, prompt):
    """`folio sample --temperature 0` (the prompt encoded by folio's tokenizer, the text decoded)
    prints the prompt and the reference's greedy continuation, up to <|endoftext|>."""
    ids = json.loads(subprocess.run([FOLIO, "tokenize", "--tokenizer", folder], input=prompt,
                                    capture_output=True, check=True).stdout)
    expected = ref.greedy(config, tensors, ids, 12)[len(ids):]
    if config["eos_token_id"] in expected:
        expected = expected[:expected.index(config["eos_token_id"])]
    with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
        text_of = {i: t for t, i in json.load(f).items()}
    byte_of = {c: b for b, c in ref.bytes_to_unicode().items()}
    text = prompt + b"".join(bytes(byte_of[c] for c in text_of[i]) for i in expected)
    prompt_file = os.path.join(WORK, "prompt.txt")
    with open(prompt_file, "wb") as f:
        f.write(prompt)
    result = subprocess.run([FOLIO, "sample", "--ckpt", checkpoint, "--prompt_file", prompt_file,
                             "--temperature", "0", "--max_new_tokens", "12", "--quiet"],
                            capture_output=True)
    check(result.returncode == 0 and result.stdout.startswith(text)
          and len(result.stdout) - len(text) <= 1,
          f"folio sample --temperature 0 prints the reference's greedy text {text!r} "
          f"(got {result.stdout!r})")


def finetune_from_folder_and_checkpoint(folder, checkpoint):
    """`folio train --init_from` an HF folder and its imported checkpoint (each run's config from
    the weights, no --config) train the same model on token files of the folder's tokenizer."""
    text = os.path.join(WORK, "finetune.txt")
    with open(DATA, "rb") as f, open(text, "wb") as out:
        out.write(f.read(20000))
    shards = os.path.join(WORK, "finetune_shards")
    result = run("prepare", "--data", text, "--tokenizer", folder, "--out", shards)
    check(result.returncode == 0, f"prepare token files with the folder's tokenizer {result.stderr}")
    saved = []
    for name, source in [("from_folder", folder), ("from_checkpoint", checkpoint)]:
        out_dir = os.path.join(WORK, name)
        result = run("train", "--init_from", source, "--data", shards, "--out_dir", out_dir,
                     "--max_iters=3", "--eval_interval=2", "--eval_iters=1", "--batch_size=2",
                     "--sample_tokens=0", "--quiet")
        check(result.returncode == 0, f"train --init_from {name} {result.stderr[-300:]}")
        saved.append(load_file(os.path.join(out_dir, "ckpt.safetensors")))
    before = load_file(checkpoint)
    check(sorted(saved[0]) == sorted(saved[1])
          and all(saved[0][k].tobytes() == saved[1][k].tobytes() for k in saved[0])
          and any(saved[0][k].tobytes() != before[k].tobytes() for k in before),
          "finetuning from the folder and from its imported checkpoint gives the same weights, "
          "changed from the imported ones")
    # The finetuned model back to HF: GPT-2's head has no bias, so folio's must have none either
    # (config key lm_head_bias, which import sets false where this build has it).
    finetuned = os.path.join(WORK, "from_folder", "ckpt.safetensors")
    exported = os.path.join(WORK, "exported_finetuned")
    result = run("export", "--ckpt", finetuned, "--hf", exported)
    if "lm_head_bias" in KEYS:
        check(result.returncode == 0, f"export the finetuned model {result.stderr.strip()}")
        config, tensors = ref.load_folder(exported)
        ids = [int(x) for x in np.random.default_rng(2).integers(0, config["vocab_size"], 20)]
        compare("finetuned, exported", config, tensors, finetuned, ids, ids[:3])
    else:
        check(result.returncode == 1 and "lm_head.bias" in result.stderr,
              "without the lm_head_bias key, export of a finetuned model is refused "
              f"(its head gained a bias): {result.stderr.strip()}")


def padded_vocabulary_import(folder, config, tensors):
    """With vocabulary padding (config key vocab_padding) the imported model computes the same."""
    if "vocab_padding" not in KEYS:
        print("SKIP padded import: this build has no vocab_padding key (the gpt2-model branch)")
        return
    checkpoint = os.path.join(WORK, "padded.safetensors")
    result = run("import", "--hf", folder, "--out", checkpoint, "--vocab_padding=64")
    check(result.returncode == 0, f"import with --vocab_padding=64 {result.stderr.strip()}")
    ids = [int(x) for x in np.random.default_rng(3).integers(0, config["vocab_size"], 20)]
    compare("import padded to 64", config, tensors, checkpoint, ids, ids[:3])
    exported = os.path.join(WORK, "exported_padded")
    result = run("export", "--ckpt", checkpoint, "--hf", exported)
    written = load_file(os.path.join(exported, "model.safetensors"))
    original = load_file(os.path.join(folder, "model.safetensors"))
    check(result.returncode == 0 and all(written[k].tobytes() == original[k].tobytes()
                                         for k in original),
          "export of the padded import gives the original tensors back byte for byte")


def refused(args, words, name, exit_code=1):
    result = run(*args)
    lines = result.stderr.strip().splitlines()
    ok = (result.returncode == exit_code and len(lines) == 1
          and lines[0].startswith("folio: error:") and all(w in lines[0] for w in words))
    check(ok, f"refused: {name} ({lines[0] if lines else 'no message'}; exit {result.returncode})")


def fixture(name, **options):
    folder = os.path.join(WORK, name)
    shutil.rmtree(folder, ignore_errors=True)
    config, tensors = ref.write_random_gpt2(folder, **options)
    return folder, config, tensors


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    rng = np.random.default_rng(1)

    # 1 + 2. HF -> folio -> HF, for each activation folio and GPT-2 share.
    # GPT-2's own gelu_new is folio's gelu_tanh; transformers' gelu (erf) and relu are folio's too.
    folio_names = {"gelu_new": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
    for seed, activation in enumerate(folio_names):
        folder, config, tensors = fixture("hf_" + activation, activation=activation, seed=seed)
        checkpoint = os.path.join(WORK, activation + ".safetensors")
        result = run("import", "--hf", folder, "--out", checkpoint)
        check(result.returncode == 0, f"import {activation}: {result.stdout.strip()}"
              f"{result.stderr.strip()}")
        info = run("info", checkpoint, "--json")
        check(info.returncode == 0 and json.loads(info.stdout)["config"]["activation"] == folio_names[activation],
              f"folio info reads the imported {activation} checkpoint")
        V = config["vocab_size"]
        ids = [int(x) for x in rng.integers(0, V, config["n_positions"] + 1)]
        compare("import " + activation, config, tensors, checkpoint, ids, ids[:3])

        sample_matches_reference(checkpoint, folder, config, tensors, b"the cat")

        if activation == "gelu_new":
            finetune_from_folder_and_checkpoint(folder, checkpoint)
            padded_vocabulary_import(folder, config, tensors)

        exported = os.path.join(WORK, "exported_" + activation)
        result = run("export", "--ckpt", checkpoint, "--hf", exported)
        check(result.returncode == 0, f"export {activation}: {result.stderr.strip()}")
        original = load_file(os.path.join(folder, "model.safetensors"))
        written = load_file(os.path.join(exported, "model.safetensors"))
        check(sorted(written) == sorted(original), "export writes exactly the fixture's tensor names")
        same = [k for k in original if k in written and written[k].dtype == original[k].dtype
                and written[k].shape == original[k].shape
                and written[k].tobytes() == original[k].tobytes()]
        check(len(same) == len(original), f"export: {len(same)}/{len(original)} tensors byte for "
              "byte the original's")
        from safetensors import safe_open
        with safe_open(os.path.join(exported, "model.safetensors"), "np") as f:
            check(f.metadata().get("format") == "pt", "export: metadata format is pt")
        with open(os.path.join(exported, "config.json")) as f:
            written_config = json.load(f)
        keys = ["model_type", "vocab_size", "n_positions", "n_embd", "n_layer", "n_head",
                "activation_function", "layer_norm_epsilon", "tie_word_embeddings"]
        check(all(written_config.get(k, True) == config.get(k, True) for k in keys)
              and written_config["architectures"] == ["GPT2LMHeadModel"],
              "export: config.json has the fixture's structure keys")
        with open(os.path.join(exported, "tokenizer.json")) as f:
            tokenizer = json.load(f)
        with open(os.path.join(folder, "vocab.json")) as f:
            vocab = json.load(f)
        check(tokenizer["model"]["vocab"] == vocab and written_config["eos_token_id"] == V - 1,
              "export: tokenizer.json holds the imported vocabulary, eos is <|endoftext|>")
        again = run("export", "--ckpt", checkpoint, "--hf", exported)
        check(again.returncode == 1 and "--force" in again.stderr,
              "export will not replace a model.safetensors without --force")

    # 3. A model folio trained, nanoGPT's structure (GELU, no biases, tied): exported, the
    # reference computes from the folder what folio computes from the checkpoint.
    for name, tied in [("baby", "true"), ("baby_untied", "false")]:
        run_dir = os.path.join(WORK, name)
        result = run("train", "--config", "baby", "--data", DATA, "--out_dir", run_dir,
                     "--max_iters=5", "--eval_interval=4", "--eval_iters=1", "--n_layer=2",
                     "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
                     "--sample_tokens=0", "--init_std=0.3", "--tie_weights=" + tied, "--quiet")
        check(result.returncode == 0, f"train a small nanoGPT-structured model {result.stderr[-300:]}")
        trained = os.path.join(run_dir, "ckpt.safetensors")
        exported = os.path.join(WORK, "exported_" + name)
        result = run("export", "--ckpt", trained, "--hf", exported)
        check(result.returncode == 0 and "no GPT-2 tokenizer" in result.stdout,
              f"export a folio-trained model: {result.stdout.strip()} {result.stderr.strip()}")
        config, tensors = ref.load_folder(exported)
        check(all(float(tensors[k].abs().max()) == 0 for k in tensors if k.endswith(".bias"))
              and config["tie_word_embeddings"] == (tied == "true")
              and ("lm_head.weight" in tensors) == (tied == "false"),
              "the biases folio's model lacks are exported as zeros; the head as tied or not")
        ids = [int(x) for x in rng.integers(0, config["vocab_size"], 17)]
        compare(f"folio-trained {name}, exported", config, tensors, trained, ids, [0, 1])
        # Its characters travel in config.json (no HF tokenizer file holds characters): import
        # and --init_from read the folder back as the same model, where both had refused it.
        reimported = os.path.join(WORK, "reimported_" + name + ".safetensors")
        result = run("import", "--hf", exported, "--out", reimported)
        check(result.returncode == 0 and "65 characters" in result.stdout,
              f"import of a char model's export: {result.stdout.strip()} {result.stderr.strip()}")
        evals = [run("eval", "--ckpt", path, "--data", DATA, "--max_windows=64", "--quiet")
                 for path in (trained, reimported)]
        check(all(e.returncode == 0 for e in evals) and
              json.loads(evals[0].stdout)["val_loss"] == json.loads(evals[1].stdout)["val_loss"],
              f"the reimported char model evaluates as the one exported: "
              f"{[e.stdout.strip() + e.stderr.strip() for e in evals]}")
        result = run("train", "--init_from", exported, "--data", DATA, "--out_dir",
                     os.path.join(WORK, "from_export_" + name), "--max_iters=1", "--eval_iters=1",
                     "--sample_tokens=0", "--quiet")
        check(result.returncode == 0, f"--init_from a char model's export: {result.stderr.strip()}")
        check(config["eos_token_id"] is None and config["bos_token_id"] is None,
              f"a char model's config.json names no end-of-text token (it had 50256, a row its "
              f"embedding of {config['vocab_size']} lacks): {config['eos_token_id']}")
        # An earlier export's tokenizer.json in the folder: refused without --force (as its
        # model.safetensors is), removed with it (AutoTokenizer would load it for this model).
        stale = os.path.join(WORK, "stale_" + name)
        os.makedirs(stale, exist_ok=True)
        with open(os.path.join(stale, "tokenizer.json"), "w") as f:
            f.write("{}")
        refused(["export", "--ckpt", trained, "--hf", stale], ["tokenizer.json exists"],
                "export over an earlier export's tokenizer.json")
        result = run("export", "--ckpt", trained, "--hf", stale, "--force")
        check(result.returncode == 0 and
              not os.path.exists(os.path.join(stale, "tokenizer.json")),
              f"export --force of a char model removes a stale tokenizer.json {result.stderr}")

    # 4. Refusals, each one line naming the cause.
    folder, _, _ = fixture("replaced")
    out = os.path.join(WORK, "replaced.safetensors")
    refused(["import", "--hf", folder, "--out", out, "--n_layer=5"],
            ["--n_layer 5", "config.json makes it 2"], "a structure key config.json decides",
            exit_code=2)
    refused(["import", "--hf", folder, "--out", out, "--learning_rate=3e-5"],
            ["min_lr (6e-05) must not exceed learning_rate", "--lr_schedule=constant"],
            "a recipe at odds with itself, as train refuses it", exit_code=2)
    result = run("import", "--hf", folder, "--out", out, "--learning_rate=1e-4")
    check(result.returncode == 0, f"import with a recipe key {result.stderr.strip()}")
    before = open(out, "rb").read()
    refused(["import", "--hf", folder, "--out", out], ["exists: pass --force"],
            "import over an existing checkpoint")
    check(open(out, "rb").read() == before, "a refused import leaves the checkpoint as it was")
    result = run("import", "--hf", folder, "--out", out, "--force")
    check(result.returncode == 0 and open(out, "rb").read() != before,
          f"import --force replaces it (with the default recipe) {result.stderr.strip()}")
    folder, _, _ = fixture("bad", extra_config={"scale_attn_by_inverse_layer_idx": True})
    out = os.path.join(WORK, "never.safetensors")
    refused(["import", "--hf", folder, "--out", out], ["scale_attn_by_inverse_layer_idx"],
            "attention scaled by layer")
    for key, value, words in [("reorder_and_upcast_attn", True, ["reorder_and_upcast_attn"]),
                              ("activation_function", "silu", ["activation_function", "silu"]),
                              ("layer_norm_epsilon", 1e-6, ["layer_norm_epsilon"]),
                              ("n_inner", 100, ["n_inner"]),
                              ("model_type", "llama", ["model_type"]),
                              # numbers C++ cannot cast to int (found by fuzz_hf_config)
                              ("n_positions", 1e300, ["n_positions", "not a whole number"]),
                              ("n_layer", 2.5, ["n_layer", "not a whole number"]),
                              ("n_embd", 2**31, ["n_embd", "out of range"]),
                              ("n_inner", 2**33, ["n_inner", "out of range"])]:
        fixture("bad", extra_config={key: value})
        refused(["import", "--hf", folder, "--out", out], words, f"{key} = {value}")
    _, config, tensors = fixture("bad")
    from safetensors.numpy import save_file
    arrays = {k: v.numpy() for k, v in tensors.items()}
    arrays["lm_head.weight"] = arrays["transformer.wte.weight"] + 1
    save_file(arrays, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    refused(["import", "--hf", folder, "--out", out], ["lm_head.weight", "tie_word_embeddings"],
            "an untied head in a folder that says tied")
    del arrays["lm_head.weight"]
    del arrays["transformer.h.1.mlp.c_fc.bias"]
    save_file(arrays, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    refused(["import", "--hf", folder, "--out", out], ["transformer.h.1.mlp.c_fc.bias"],
            "a missing tensor")
    os.rename(os.path.join(folder, "model.safetensors"), os.path.join(folder, "pytorch_model.bin"))
    refused(["import", "--hf", folder, "--out", out], ["pytorch_model.bin", "save_file"],
            "pytorch_model.bin only, with the conversion command")
    check(not os.path.exists(out), "no checkpoint is written by a refused import")
    refused(["import", "--hf", folder], ["--out"], "import without --out", exit_code=2)

    # The seed's structure (untied head with a bias), narrow heads (tiny) and seed 004's post-norm
    # blocks are not GPT-2.
    for preset, words in [("shakespeare_char", ["lm_head.bias"]), ("tiny", ["n_embd"]),
                          ("seed004", ["post_norm"])]:
        run_dir = os.path.join(WORK, preset)
        result = run("train", "--config", preset, "--data", DATA, "--out_dir", run_dir,
                     "--max_iters=5", "--eval_interval=4", "--eval_iters=1", "--n_layer=1",
                     "--block_size=8", "--batch_size=2", "--sample_tokens=0", "--quiet",
                     *(["--n_embd=24", "--n_head=2", "--head_size=0"] if preset != "tiny" else []))
        refused(["export", "--ckpt", os.path.join(run_dir, "ckpt.safetensors"), "--hf",
                 os.path.join(WORK, "never_" + preset)], ["cannot export", *words],
                f"export of {preset}")

    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
