"""The PyTorch 2.x peer of `folio bench` on a GPU: the same model and training step, written the
way a performance-minded user writes it: one fused qkv Linear and batched heads (bench/
torch_peer.py's FusedGPT), attention through F.scaled_dot_product_attention (causal, dropout on
the weights), bf16 autocast, AdamW(fused=True), clipping when the config asks, and
torch.compile. Timed as folio bench times: the median of steps each waited for, after a warm-up
that includes the compilation.

    python3 bench/gpu/torch_gpu_peer.py --config shakespeare_char [--steps 50] [--warmup 15]
        [--compile_mode default|reduce-overhead|max-autotune] [--batch_size B] [--block_size T]
        [--vocab_size V]

`--compile_mode reduce-overhead` has torch.compile replay the model's kernels as CUDA graphs (as
folio bench replays its step): for a model this small the default mode can wait on Python
between kernels. The character presets' vocabulary is 65; `--vocab_size 50257` for GPT-2's.

Prints one JSON line, like folio bench.
"""

import argparse
import json
import math
import os
import sys
import time

import torch
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_peer  # noqa: E402


class SdpaBlock(torch_peer.FusedBlock):
    """torch_peer's block with its attention in one fused kernel."""

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(self.H * self.hs, dim=2)
        q, k, v = (t.view(B, T, self.H, self.hs).transpose(1, 2) for t in (q, k, v))
        p = self.p if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, self.H * self.hs)
        x = x + F.dropout(self.proj(y), self.p, self.training)
        return x + F.dropout(self.fc2(self.act(self.fc(self.ln2(x)))), self.p, self.training)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="shakespeare_char")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--compile_mode", default="default",
                        choices=["default", "reduce-overhead", "max-autotune"])
    parser.add_argument("--batch_size", type=int)
    parser.add_argument("--block_size", type=int)
    parser.add_argument("--vocab_size", type=int, default=65)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit(f"torch_gpu_peer: PyTorch {torch.__version__} of {sys.executable} sees no CUDA "
                 f"GPU (torch.version.cuda = {torch.version.cuda}): run it with a Python whose "
                 "PyTorch 2.x is built for CUDA, on a machine with a GPU")
    torch.set_default_device("cuda")
    torch.manual_seed(1337)
    cfg = torch_peer.read_preset(args.config)
    for key in ("batch_size", "block_size"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    V = args.vocab_size
    padding = cfg.get("vocab_padding", 1)  # rows padded as the preset says, as folio pads them
    model = torch_peer.FusedGPT(cfg, (V + padding - 1) // padding * padding)
    model.blocks = torch.nn.Sequential(*[SdpaBlock(cfg) for _ in range(cfg["n_layer"])])
    model.train()
    optimizer = torch_peer.make_adamw(model, cfg, fused=True)
    step_model = model if args.no_compile else torch.compile(model, mode=args.compile_mode)
    B, T = cfg["batch_size"], cfg["block_size"]
    times = []
    for step in range(args.warmup + args.steps):
        x = torch.randint(V, (B, T))
        y = torch.randint(V, (B, T))
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = step_model(x, y)
        loss.backward()
        if cfg.get("grad_clip", 0) > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append((time.perf_counter() - start) * 1000)
    times.sort()
    median = times[len(times) // 2]
    assert math.isfinite(loss.item())
    extras = "bf16 autocast, SDPA, fused AdamW" + (
        "" if args.no_compile else f", torch.compile mode={args.compile_mode}")
    print(json.dumps({"config": args.config, "device": "cuda", "gpu": torch.cuda.get_device_name(),
                      "batch_size": B, "block_size": T, "vocab_size": V,
                      "peer": f"torch {torch.__version__} ({extras})", "ms_per_step": median,
                      "ms_per_step_min": times[0], "tokens_per_s": B * T / (median / 1000)}))


if __name__ == "__main__":
    main()
