"""The PyTorch peer of `folio bench`: the same model and training step, timed the same way.

    python3 bench/torch_peer.py --config baby --threads 2 [--impl seed|fused] [--steps N]
                                [--mode eager|compile|bf16|bf16-compile]
    python3 bench/torch_peer.py --about     # torch's version and build, threads, the CPU
    python3 bench/torch_peer.py --config shakespeare_char --sample 200 [--impl] [--mode]
                                            # the seed's generate(), tokens/s

--impl seed runs the seed's own module structure (a Linear per head, tools/folio_torch.py);
--impl fused runs the same function the way a performance-minded user writes it (nanoGPT's
style: one fused qkv Linear, all heads in one batched matmul, and from PyTorch 2.0 on attention
through F.scaled_dot_product_attention). --mode picks how PyTorch runs it: fp32 eager,
torch.compile, bf16 autocast, or both (PyTorch 2.x; bench/torch2_peer.sh makes the venv). Each
takes the AdamW step with clipping when the config asks for it. Prints one JSON line, like
`folio bench`.
"""

import argparse
import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn as nn
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import folio_torch  # noqa: E402


def read_preset(name):
    path = os.path.join(os.path.dirname(__file__), "..", "configs", name + ".conf")
    cfg = {}
    for line in open(path):
        line = line.split("#")[0].strip()
        if "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            for cast in (int, float):
                try:
                    value = cast(value)
                    break
                except ValueError:
                    pass
            if value in ("true", "false"):
                value = value == "true"
            cfg[key] = value
    return cfg


class FusedBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, self.H = cfg["n_embd"], cfg["n_head"]
        self.hs = cfg.get("head_size") or C // self.H
        A = self.H * self.hs
        self.ln1 = folio_torch.LayerNorm(C, cfg["bias"])
        self.qkv = nn.Linear(C, 3 * A, bias=cfg.get("qkv_bias", False))
        self.proj = nn.Linear(A, C, bias=cfg["bias"])
        self.ln2 = folio_torch.LayerNorm(C, cfg["bias"])
        self.fc = nn.Linear(C, 4 * C, bias=cfg["bias"])
        self.act = folio_torch.activation_module(cfg["activation"])
        self.fc2 = nn.Linear(4 * C, C, bias=cfg["bias"])
        self.p = cfg["dropout"]
        T = cfg["block_size"]
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(self.H * self.hs, dim=2)
        q, k, v = (t.view(B, T, self.H, self.hs).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2.0 on: the fused kernel
            p = self.p if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hs))
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            att = F.dropout(F.softmax(att, dim=-1), self.p, self.training)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, self.H * self.hs)
        x = x + F.dropout(self.proj(y), self.p, self.training)
        return x + F.dropout(self.fc2(self.act(self.fc(self.ln2(x)))), self.p, self.training)


class FusedGPT(nn.Module):
    def __init__(self, cfg, vocab_size):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, cfg["n_embd"])
        self.wpe = nn.Embedding(cfg["block_size"], cfg["n_embd"])
        self.blocks = nn.Sequential(*[FusedBlock(cfg) for _ in range(cfg["n_layer"])])
        self.ln_f = folio_torch.LayerNorm(cfg["n_embd"], cfg["bias"])
        self.lm_head = nn.Linear(cfg["n_embd"], vocab_size,
                                 bias=cfg["bias"] and cfg.get("lm_head_bias", True))
        if cfg.get("tie_weights"):
            self.lm_head.weight = self.wte.weight

    def forward(self, idx, targets=None):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        logits = self.lm_head(self.ln_f(self.blocks(x)))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))


def make_adamw(model, cfg, **options):
    """AdamW as the preset configures it: weight decay on every parameter, or on matrices only."""
    def decays(p):
        return cfg["decay_params"] == "all" or p.dim() >= 2

    params = list(model.parameters())
    return torch.optim.AdamW(
        [{"params": [p for p in params if decays(p)], "weight_decay": cfg["weight_decay"]},
         {"params": [p for p in params if not decays(p)], "weight_decay": 0.0}],
        lr=cfg["learning_rate"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["adam_eps"],
        **options)


def time_sampling(model, cfg, args, compiled, autocast):
    """The seed's generate(): the context cropped to block_size, a forward over all of it, the
    last row's softmax, one multinomial draw, for args.sample new tokens after a prompt of
    block_size random tokens, so that every token recomputes a whole window, as folio's sampling
    past the context does (within the context folio keeps a key/value cache, the seed does not:
    a prompt this long leaves both sides the same work). Returns tokens/s over the whole loop."""
    model.eval()
    forward = torch.compile(model) if compiled else model
    V, T = args.vocab_size, cfg["block_size"]
    idx = torch.randint(V, (1, T))
    # The window is copied out of the growing context: with a view into it (its storage offset
    # moving every token) the compiled modes ran 2-4x slower than eager on a Zen 4, 9 tokens/s.
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        for _ in range(args.warmup):  # compiles, for the compiled modes
            forward(idx[:, -T:].clone())
        start = time.perf_counter()
        for _ in range(args.sample):
            logits, _ = forward(idx[:, -T:].clone())
            probs = F.softmax(logits[:, -1, :V].float(), dim=-1)
            idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        elapsed = time.perf_counter() - start
    return args.sample / elapsed


def about():
    """What the peer is: torch's version and build (its BLAS and oneDNN), threads, the CPU."""
    cpu = "unknown"
    if os.path.exists("/proc/cpuinfo"):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"torch": torch.__version__, "threads": torch.get_num_threads(), "cpu": cpu,
            "cpu_capability": getattr(torch.backends.cpu, "get_cpu_capability", lambda: "?")(),
            "config": torch.__config__.show()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="shakespeare_char")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--impl", choices=["seed", "fused"], default="seed")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--mode", choices=["eager", "compile", "bf16", "bf16-compile"],
                        default="eager")
    parser.add_argument("--about", action="store_true")
    parser.add_argument("--sample", type=int, default=0,
                        help="time the seed's generate() for this many tokens instead of training")
    # GPT-2 (bench/gpt2_cpu_compare.sh): its vocabulary, and a smaller batch than the preset's
    parser.add_argument("--vocab_size", type=int, default=65)
    parser.add_argument("--batch_size", type=int)
    parser.add_argument("--block_size", type=int)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.about:
        print(json.dumps(about()))
        return
    compiled = args.mode in ("compile", "bf16-compile")
    autocast = args.mode in ("bf16", "bf16-compile")
    if compiled:
        args.warmup = max(args.warmup, 3)  # the first steps compile (forward, backward)
    torch.manual_seed(1337)
    cfg = read_preset(args.config)
    for key in ("batch_size", "block_size"):
        if getattr(args, key):
            cfg[key] = getattr(args, key)
    V = args.vocab_size
    # The model's rows padded as the preset says (nanoGPT trains GPT-2 with 50304 rows too)
    padding = cfg.get("vocab_padding", 1)
    rows = (V + padding - 1) // padding * padding
    model = (folio_torch.GPTLanguageModel(cfg, rows) if args.impl == "seed" else FusedGPT(cfg, rows))
    if args.sample:
        print(json.dumps({"config": args.config, "device": "cpu", "block_size": cfg["block_size"],
                          "peer": f"torch {torch.__version__} ({args.impl}, {args.mode})",
                          "impl": args.impl, "mode": args.mode, "threads": torch.get_num_threads(),
                          "new_tokens": args.sample,
                          "tokens_per_s": time_sampling(model, cfg, args, compiled, autocast)}))
        return
    model.train()
    optimizer = make_adamw(model, cfg)
    step_model = torch.compile(model) if compiled else model
    B, T = cfg["batch_size"], cfg["block_size"]
    times, cpu_times = [], []  # wall-clock and CPU time (all threads) per step
    for step in range(args.warmup + args.steps):
        x = torch.randint(V, (B, T))
        y = torch.randint(V, (B, T))
        start, cpu_start = time.perf_counter(), time.process_time()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            _, loss = step_model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.get("grad_clip", 0) > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        optimizer.step()
        elapsed = time.perf_counter() - start
        if step >= args.warmup:
            times.append(elapsed * 1000)
            cpu_times.append((time.process_time() - cpu_start) * 1000)
    times.sort()
    cpu_times.sort()
    median = times[len(times) // 2]
    print(json.dumps({"config": args.config, "device": "cpu", "batch_size": B, "block_size": T, "peer": f"torch {torch.__version__} ({args.impl}, {args.mode})",
                      "impl": args.impl, "mode": args.mode,
                      "threads": torch.get_num_threads(), "ms_per_step": median,
                      "ms_per_step_min": times[0], "cpu_ms_per_step": cpu_times[len(times) // 2],
                      "tokens_per_s": B * T / (median / 1000),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
