"""The PyTorch peer of `folio bench`: the same model and training step, timed the same way.

    python3 bench/torch_peer.py --config baby --threads 2 [--impl seed|fused] [--steps N]

--impl seed runs the seed's own module structure (a Linear per head, tools/folio_torch.py);
--impl fused runs the same function the way a performance-minded user writes it (nanoGPT's
style: one fused qkv Linear, all heads in one batched matmul). Both take the AdamW step with
clipping when the config asks for it. Prints one JSON line, like `folio bench`.
"""

import argparse
import json
import math
import os
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
        self.qkv = nn.Linear(C, 3 * A, bias=False)
        self.proj = nn.Linear(A, C, bias=cfg["bias"])
        self.ln2 = folio_torch.LayerNorm(C, cfg["bias"])
        self.fc = nn.Linear(C, 4 * C, bias=cfg["bias"])
        self.act = nn.GELU() if cfg["activation"] == "gelu" else nn.ReLU()
        self.fc2 = nn.Linear(4 * C, C, bias=cfg["bias"])
        self.p = cfg["dropout"]
        T = cfg["block_size"]
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(self.H * self.hs, dim=2)
        q, k, v = (t.view(B, T, self.H, self.hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hs))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.dropout(F.softmax(att, dim=-1), self.p, self.training)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, self.H * self.hs)
        x = x + F.dropout(self.proj(y), self.p, self.training)
        return x + F.dropout(self.fc2(self.act(self.fc(self.ln2(x)))), self.p, self.training)


class FusedGPT(nn.Module):
    def __init__(self, cfg, vocab_size):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, cfg["n_embd"])
        self.wpe = nn.Embedding(cfg["block_size"], cfg["n_embd"])
        self.blocks = nn.Sequential(*[FusedBlock(cfg) for _ in range(cfg["n_layer"])])
        self.ln_f = folio_torch.LayerNorm(cfg["n_embd"], cfg["bias"])
        self.lm_head = nn.Linear(cfg["n_embd"], vocab_size, bias=cfg["bias"])
        if cfg.get("tie_weights"):
            self.lm_head.weight = self.wte.weight

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        logits = self.lm_head(self.ln_f(self.blocks(x)))
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="shakespeare_char")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--impl", choices=["seed", "fused"], default="seed")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1337)
    cfg = read_preset(args.config)
    V = 65
    model = (folio_torch.GPTLanguageModel(cfg, V) if args.impl == "seed" else FusedGPT(cfg, V))
    model.train()
    optimizer = make_adamw(model, cfg)
    B, T = cfg["batch_size"], cfg["block_size"]
    times = []
    for step in range(args.warmup + args.steps):
        x = torch.randint(V, (B, T))
        y = torch.randint(V, (B, T))
        start = time.perf_counter()
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.get("grad_clip", 0) > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        optimizer.step()
        elapsed = time.perf_counter() - start
        if step >= args.warmup:
            times.append(elapsed * 1000)
    times.sort()
    median = times[len(times) // 2]
    print(json.dumps({"config": args.config, "device": "cpu", "peer": f"torch {torch.__version__} ({args.impl})",
                      "threads": torch.get_num_threads(), "ms_per_step": median,
                      "tokens_per_s": B * T / (median / 1000)}))


if __name__ == "__main__":
    main()
