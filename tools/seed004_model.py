"""Seed 004's model in PyTorch, as its notebook writes it (module names included), for folio
checkpoints written with torch_names = seed004 (the `seed004` preset).

The classes are the notebook's FeedForward, Head, MultiHeadAttention, ResidualBlock and
AttentionModel, unchanged but for comments: PyTorch's default init, biases on k/q/v, the block
x = layernorm1(x); x = x + multihead(x); x = layernorm2(x); x = x + feedforward(x), the final
LayerNorm as the last entry of `blocks`, scores k @ q^T. folio_torch.load_folio_checkpoint picks
this model for such checkpoints.
"""

import torch


class FeedForward(torch.nn.Module):
    def __init__(self, in_size, dropout):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(in_size, in_size * 4),
            torch.nn.ReLU(),
            torch.nn.Linear(in_size * 4, in_size),
            # add dropout
            torch.nn.Dropout(dropout)
        )

    def forward(self, x):
        return self.net(x)


class Head(torch.nn.Module):
    def __init__(self, emb_size, head_size, dropout):
        super().__init__()
        self.emb_size = emb_size
        self.k = torch.nn.Linear(emb_size, head_size)
        self.q = torch.nn.Linear(emb_size, head_size)
        self.v = torch.nn.Linear(emb_size, head_size)
        # add dropout
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, x):
        # x: B x T x E
        B, T, E = x.shape
        # B x T x L
        k = self.k(x)
        # B x T x L
        q = self.q(x)
        # B x T x L
        v = self.v(x)
        # B x T x T
        att = k @ q.transpose(-2, -1)
        att = att / (k.shape[-1] ** 0.5)
        # B x T x T
        mask = torch.tril(torch.ones(T, T))
        # B x T x T
        masked_att = att.masked_fill(mask == 0, float('-inf'))
        # B x T x T
        masked_att = torch.nn.functional.softmax(masked_att, dim=-1)
        masked_att = self.dropout(masked_att)
        # B x T x L
        att_bow = masked_att @ v
        return att_bow


class MultiHeadAttention(torch.nn.Module):
    def __init__(self, in_size, head_size, num_heads, dropout):
        super().__init__()
        self.heads = torch.nn.ModuleList([
            Head(in_size, head_size, dropout) for _ in range(num_heads)
        ])
        self.proj = torch.nn.Linear(head_size*num_heads, in_size)
        # add dropout
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, x):
        # x: B x T x E
        B, T, E = x.shape
        # B x T x n x H
        att_bows = torch.stack([head(x) for head in self.heads], dim=2)
        # B x T x n*H
        att_bows = att_bows.view(B, T, -1)
        # B x T x E
        out = self.proj(att_bows)
        out = self.dropout(out)
        return out


class ResidualBlock(torch.nn.Module):
    def __init__(self, in_size, head_size, num_heads, dropout):
        super().__init__()
        self.multihead = MultiHeadAttention(in_size, head_size, num_heads, dropout)
        self.feedforward = FeedForward(in_size, dropout)
        self.layernorm1 = torch.nn.LayerNorm(in_size)
        self.layernorm2 = torch.nn.LayerNorm(in_size)

    def forward(self, x):
        # x: B x T x in
        # B x T x in
        x = self.layernorm1(x)
        # B x T x in_size
        x = x + self.multihead(x)
        # B x T x in_size
        x = self.layernorm2(x)
        # B x T x in_size
        x = x + self.feedforward(x)
        return x


class AttentionModel(torch.nn.Module):
    def __init__(self, block_size, vocab_size, num_heads, hidden_size, num_blocks, dropout):
        super().__init__()
        self.block_size = block_size
        self.token_emb = torch.nn.Embedding(vocab_size, hidden_size)
        self.position_emb = torch.nn.Embedding(block_size, hidden_size)
        self.blocks = torch.nn.ModuleList([
                ResidualBlock(hidden_size, hidden_size // num_heads, num_heads, dropout) for _ in range(num_blocks)
            ] + [
                torch.nn.LayerNorm(hidden_size)
            ]
        )
        self.out = torch.nn.Linear(hidden_size, vocab_size)

    def forward(self, idx, target):
        # idx: B x T
        B, T = idx.shape
        # B x T x E (hidden_size)
        token_emb = self.token_emb(idx)
        # position_idx: block_size
        position_idx = torch.arange(T)
        # position_emb: block_size x emb_size
        position_emb = self.position_emb(position_idx)
        # B x T x E
        x = token_emb + position_emb
        # B x T x E
        for block in self.blocks:
            x = block(x)
        # B x T x C
        logits = self.out(x)

        if target is not None:
            # target: B x block_size
            target = target.view(-1)
            # B*block_size x vocab_size
            logits = logits.view(B*T, -1)
            loss = torch.nn.functional.cross_entropy(logits, target)
            # B x block_size x vocab_size
            logits = logits.view(B, T, -1)
        else:
            loss = None
        return logits, loss


# What the notebook's model fixes, as folio's config keys say it.
SEED004_STRUCTURE = {"bias": True, "qkv_bias": True, "block_order": "post_norm",
                     "activation": "relu", "tie_weights": False}


def attention_model(cfg, vocab_size):
    """The notebook's AttentionModel for a folio config, which must have its structure."""
    head_size = cfg.get("head_size", 0) or cfg["n_embd"] // cfg["n_head"]
    differs = {key: cfg.get(key) for key, value in SEED004_STRUCTURE.items() if cfg.get(key) != value}
    if head_size != cfg["n_embd"] // cfg["n_head"]:
        differs["head_size"] = head_size
    if differs:
        raise RuntimeError(f"seed 004's AttentionModel has {SEED004_STRUCTURE} and head_size = "
                           f"n_embd // n_head; this checkpoint has {differs}")
    return AttentionModel(block_size=cfg["block_size"], vocab_size=vocab_size,
                          num_heads=cfg["n_head"], hidden_size=cfg["n_embd"],
                          num_blocks=cfg["n_layer"], dropout=cfg["dropout"])
