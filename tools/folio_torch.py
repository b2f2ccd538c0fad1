"""The seed's GPT in PyTorch, and folio checkpoints loaded into it.

The model classes are seed 000's (Head, MultiHeadAttention, FeedFoward, Block,
GPTLanguageModel), with the switches folio's configs have: activation (relu|gelu|gelu_tanh), bias
(Linear and LayerNorm biases), qkv_bias (key/query/value biases), lm_head_bias, block_order
(pre_norm|post_norm), tie_weights (lm_head shares the token embedding) and head_size
(n_embd // n_head by default). With the defaults it is seed 000's model exactly. Checkpoints
written with torch_names = seed004 load into seed 004's own model instead (seed004_model.py).

Use as a library (tests import it) or as a script:

    python3 tools/folio_torch.py out/ckpt.safetensors --data input.txt

loads a folio checkpoint with load_state_dict (strict, but for the seed's `tril` mask buffers,
which are not weights) and prints its loss over every consecutive block_size window of each split,
as `folio eval` does, as one JSON line.
"""

import argparse
import json
import math
import sys

import torch
import torch.nn as nn
from torch.nn import functional as F


class LayerNorm(nn.Module):
    """nn.LayerNorm(eps=1e-5) whose bias can be left out (nanoGPT's recipe has none)."""

    def __init__(self, n_embd, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n_embd))
        self.bias = nn.Parameter(torch.zeros(n_embd)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class Head(nn.Module):
    """one head of self-attention"""

    def __init__(self, cfg, head_size):
        super().__init__()
        qkv_bias = cfg.get("qkv_bias", False)
        self.key = nn.Linear(cfg["n_embd"], head_size, bias=qkv_bias)
        self.query = nn.Linear(cfg["n_embd"], head_size, bias=qkv_bias)
        self.value = nn.Linear(cfg["n_embd"], head_size, bias=qkv_bias)
        block_size = cfg["block_size"]
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(cfg["dropout"])

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)
        q = self.query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        v = self.value(x)
        return wei @ v


class MultiHeadAttention(nn.Module):
    """multiple heads of self-attention in parallel"""

    def __init__(self, cfg, num_heads, head_size):
        super().__init__()
        self.heads = nn.ModuleList([Head(cfg, head_size) for _ in range(num_heads)])
        self.proj = nn.Linear(head_size * num_heads, cfg["n_embd"], bias=cfg["bias"])
        self.dropout = nn.Dropout(cfg["dropout"])

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        return self.dropout(self.proj(out))


def activation_module(name):
    """folio's `activation`: relu, gelu (exact erf) or gelu_tanh (GPT-2's tanh form)."""
    if name == "gelu":
        return nn.GELU()
    if name == "gelu_tanh":
        return nn.GELU(approximate="tanh")
    return nn.ReLU()


class FeedFoward(nn.Module):
    """a simple linear layer followed by a non-linearity"""

    def __init__(self, cfg):
        super().__init__()
        n_embd = cfg["n_embd"]
        self.net = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd, bias=cfg["bias"]),
            activation_module(cfg["activation"]),
            nn.Linear(4 * n_embd, n_embd, bias=cfg["bias"]),
            nn.Dropout(cfg["dropout"]),
        )

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    """Transformer block: communication followed by computation"""

    def __init__(self, cfg):
        super().__init__()
        head_size = cfg.get("head_size", 0) or cfg["n_embd"] // cfg["n_head"]
        self.sa = MultiHeadAttention(cfg, cfg["n_head"], head_size)
        self.ffwd = FeedFoward(cfg)
        self.ln1 = LayerNorm(cfg["n_embd"], cfg["bias"])
        self.ln2 = LayerNorm(cfg["n_embd"], cfg["bias"])
        self.post_norm = cfg.get("block_order", "pre_norm") == "post_norm"

    def forward(self, x):
        if self.post_norm:  # seed 004's order: the normalised stream replaces the residual one
            x = self.ln1(x)
            x = x + self.sa(x)
            x = self.ln2(x)
            return x + self.ffwd(x)
        x = x + self.sa(self.ln1(x))
        x = x + self.ffwd(self.ln2(x))
        return x


class GPTLanguageModel(nn.Module):
    def __init__(self, cfg, vocab_size):
        super().__init__()
        self.block_size = cfg["block_size"]
        self.token_embedding_table = nn.Embedding(vocab_size, cfg["n_embd"])
        self.position_embedding_table = nn.Embedding(cfg["block_size"], cfg["n_embd"])
        # nanoGPT's transformer.drop (config key embedding_dropout; the seed has none)
        self.embedding_dropout = nn.Dropout(cfg.get("embedding_dropout", 0.0))
        self.blocks = nn.Sequential(*[Block(cfg) for _ in range(cfg["n_layer"])])
        self.ln_f = LayerNorm(cfg["n_embd"], cfg["bias"])
        self.lm_head = nn.Linear(cfg["n_embd"], vocab_size,
                                 bias=cfg["bias"] and cfg.get("lm_head_bias", True))
        self.apply(self._init_weights)
        if cfg.get("tie_weights"):
            self.lm_head.weight = self.token_embedding_table.weight

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        tok_emb = self.token_embedding_table(idx)
        pos_emb = self.position_embedding_table(torch.arange(T, device=idx.device))
        x = self.embedding_dropout(tok_emb + pos_emb)
        x = self.blocks(x)
        x = self.ln_f(x)
        logits = self.lm_head(x)
        if targets is None:
            return logits, None
        B, T, V = logits.shape
        loss = F.cross_entropy(logits.view(B * T, V), targets.view(B * T))
        return logits, loss


def read_safetensors(path):
    """Tensors and metadata of a safetensors file, with the official reader."""
    try:
        from safetensors import safe_open
    except ImportError:
        sys.exit("folio_torch: the `safetensors` package is missing: pip install safetensors")
    tensors = {}
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata() or {}
        for name in f.keys():
            tensors[name] = f.get_tensor(name)
    return tensors, metadata


def load_folio_checkpoint(path):
    """(model, config, vocabulary) from a folio checkpoint; strict but for `tril` buffers. The
    vocabulary is a char model's characters, or None for a BPE model (its tokenizer.json text is
    metadata["tokenizer"])."""
    state, metadata = read_safetensors(path)
    cfg = json.loads(metadata["config"])
    vocab = list(metadata["vocab"]) if "vocab" in metadata else None
    if cfg.get("torch_names", "seed000") == "seed004":
        import seed004_model  # beside this file
        model = seed004_model.attention_model(cfg, len(vocab))
    else:
        model = GPTLanguageModel(cfg, state["token_embedding_table.weight"].shape[0])
    result = model.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys if not k.endswith(".tril")]
    if missing or result.unexpected_keys:
        raise RuntimeError(f"checkpoint does not match the model: missing {missing}, "
                           f"unexpected {result.unexpected_keys}")
    model.eval()
    return model, cfg, vocab


def read_text(path):
    with open(path, "r", encoding="utf-8") as f:
        return f.read()


@torch.no_grad()
def split_loss(model, data, block_size, batch_size=64):
    """Mean loss over all consecutive non-overlapping block_size windows (folio eval's)."""
    windows = (len(data) - 1) // block_size
    total = 0.0
    for first in range(0, windows, batch_size):
        count = min(batch_size, windows - first)
        starts = [(first + k) * block_size for k in range(count)]
        x = torch.stack([data[s:s + block_size] for s in starts])
        y = torch.stack([data[s + 1:s + block_size + 1] for s in starts])
        _, loss = model(x, y)
        total += loss.item() * count
    return total / windows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ckpt")
    parser.add_argument("--data", required=True)
    args = parser.parse_args()
    model, cfg, vocab = load_folio_checkpoint(args.ckpt)
    if vocab is None:
        sys.exit(f"{args.ckpt} is a BPE model: this script evaluates char models on a text; "
                 "use folio eval --ckpt CKPT --data TOKEN_DIR")
    stoi = {ch: i for i, ch in enumerate(vocab)}
    text = read_text(args.data)
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(cfg.get("train_fraction", 0.9) * len(data))
    print(json.dumps({
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_loss": split_loss(model, data[:n], cfg["block_size"]),
        "val_loss": split_loss(model, data[n:], cfg["block_size"]),
    }))


if __name__ == "__main__":
    main()
