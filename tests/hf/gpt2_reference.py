"""GPT-2 as Hugging Face transformers computes it (modeling_gpt2.py's GPT2LMHeadModel), written
out in plain PyTorch so that it runs on Debian's torch 1.13, where current transformers does not.

Conv1D is `x @ W + b` with W stored (in, out); c_attn packs query, key and value as three column
blocks; attention is causal, scaled by 1/sqrt(head_dim); LayerNorm eps from config.json; the head
is tied to wte unless tie_word_embeddings is false. Also: a random GPT-2 folder in HF's exact
layout (config.json, model.safetensors, vocab.json + merges.txt), made with numpy + safetensors.
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

ACTIVATIONS = {
    # transformers' ACT2FN: gelu_new is the tanh form (NewGELUActivation), gelu the exact erf one.
    "gelu_new": lambda x: 0.5 * x * (1.0 + torch.tanh(
        math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))),
    "gelu": F.gelu,
    "relu": F.relu,
}


def load_folder(folder):
    from safetensors.numpy import load_file
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    tensors = {k: torch.from_numpy(v.copy()) for k, v in
               load_file(os.path.join(folder, "model.safetensors")).items()}
    return config, tensors


def forward(config, tensors, ids):
    """Logits (T, V) of the token ids `ids` (a list), as GPT2LMHeadModel.forward gives them."""
    p = {k[len("transformer."):] if k.startswith("transformer.") else k: v
         for k, v in tensors.items()}
    C, H = config["n_embd"], config["n_head"]
    hs = C // H
    eps = config.get("layer_norm_epsilon", 1e-5)
    act = ACTIVATIONS[config.get("activation_function", "gelu_new")]
    x = torch.tensor(ids, dtype=torch.long)
    T = len(ids)
    h = p["wte.weight"][x] + p["wpe.weight"][torch.arange(T)]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(config["n_layer"]):
        q_ = f"h.{i}."
        a = F.layer_norm(h, (C,), p[q_ + "ln_1.weight"], p[q_ + "ln_1.bias"], eps)
        qkv = torch.addmm(p[q_ + "attn.c_attn.bias"], a, p[q_ + "attn.c_attn.weight"])
        q, k, v = qkv.split(C, dim=1)
        q, k, v = (t.view(T, H, hs).transpose(0, 1) for t in (q, k, v))  # (H, T, hs)
        w = q @ k.transpose(-1, -2) / math.sqrt(hs)
        w = torch.where(causal, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        y = (torch.softmax(w, dim=-1) @ v).transpose(0, 1).reshape(T, C)
        h = h + torch.addmm(p[q_ + "attn.c_proj.bias"], y, p[q_ + "attn.c_proj.weight"])
        m = F.layer_norm(h, (C,), p[q_ + "ln_2.weight"], p[q_ + "ln_2.bias"], eps)
        m = act(torch.addmm(p[q_ + "mlp.c_fc.bias"], m, p[q_ + "mlp.c_fc.weight"]))
        h = h + torch.addmm(p[q_ + "mlp.c_proj.bias"], m, p[q_ + "mlp.c_proj.weight"])
    h = F.layer_norm(h, (C,), p["ln_f.weight"], p["ln_f.bias"], eps)
    tied = config.get("tie_word_embeddings", True)
    head = p["wte.weight"] if tied else p["lm_head.weight"]
    return h @ head.t()


def loss(config, tensors, ids):
    """GPT2LMHeadModel's loss with labels=ids: logits of ids[:-1] against ids[1:]."""
    logits = forward(config, tensors, ids[:-1])
    return logits, F.cross_entropy(logits, torch.tensor(ids[1:], dtype=torch.long))


def greedy(config, tensors, prompt, new_tokens):
    """generate(do_sample=False): the most likely token, appended, new_tokens times."""
    ids = list(prompt)
    for _ in range(new_tokens):
        ids.append(int(torch.argmax(forward(config, tensors, ids[-config["n_positions"]:])[-1])))
    return ids


# ---- a random GPT-2 folder in HF's layout ---------------------------------------------------------

def bytes_to_unicode():
    """GPT-2's printable alphabet for the 256 bytes (encoder.py's bytes_to_unicode)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def write_tokenizer(folder):
    """A small byte-level BPE: the 256 bytes, a few merges, <|endoftext|> last. Returns its size."""
    alphabet = bytes_to_unicode()
    vocab = {alphabet[b]: i for i, b in enumerate(alphabet)}
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a")]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{l} {r}\n" for l, r in merges))
    return len(vocab)


def write_random_gpt2(folder, n_layer=2, n_head=4, n_embd=32, n_positions=24, seed=0,
                      activation="gelu_new", extra_config=None):
    """config.json + model.safetensors of a random GPT2LMHeadModel (tied head, saved as
    save_pretrained does: no lm_head.weight), weights large enough that the logits differ
    clearly. Returns (config, tensors) as load_folder does."""
    from safetensors.numpy import save_file
    os.makedirs(folder, exist_ok=True)
    vocab_size = write_tokenizer(folder)
    rng = np.random.default_rng(seed)
    C = n_embd
    normal = lambda *shape, std=0.3: rng.normal(0.0, std, shape).astype(np.float32)
    t = {"transformer.wte.weight": normal(vocab_size, C),
         "transformer.wpe.weight": normal(n_positions, C, std=1.0)}
    for i in range(n_layer):
        p = f"transformer.h.{i}."
        t[p + "ln_1.weight"] = 1 + normal(C, std=0.1)
        t[p + "ln_1.bias"] = normal(C, std=0.1)
        t[p + "attn.c_attn.weight"] = normal(C, 3 * C, std=0.2)
        t[p + "attn.c_attn.bias"] = normal(3 * C, std=0.1)
        t[p + "attn.c_proj.weight"] = normal(C, C, std=0.1)
        t[p + "attn.c_proj.bias"] = normal(C, std=0.1)
        t[p + "ln_2.weight"] = 1 + normal(C, std=0.1)
        t[p + "ln_2.bias"] = normal(C, std=0.1)
        t[p + "mlp.c_fc.weight"] = normal(C, 4 * C, std=0.2)
        t[p + "mlp.c_fc.bias"] = normal(4 * C, std=0.1)
        t[p + "mlp.c_proj.weight"] = normal(4 * C, C, std=0.1)
        t[p + "mlp.c_proj.bias"] = normal(C, std=0.1)
    t["transformer.ln_f.weight"] = 1 + normal(C, std=0.1)
    t["transformer.ln_f.bias"] = normal(C, std=0.1)
    save_file(t, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
              "vocab_size": vocab_size, "n_positions": n_positions, "n_ctx": n_positions,
              "n_embd": C, "n_layer": n_layer, "n_head": n_head, "n_inner": None,
              "activation_function": activation, "resid_pdrop": 0.1, "embd_pdrop": 0.1,
              "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-05, "initializer_range": 0.02,
              "scale_attn_weights": True, "use_cache": True, "bos_token_id": vocab_size - 1,
              "eos_token_id": vocab_size - 1}
    config.update(extra_config or {})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return config, {k: torch.from_numpy(v) for k, v in t.items()}
