"""A folio checkpoint of random weights for a GPT-2 size, written a tensor at a time.

Measuring what sampling from gpt2-xl costs needs a gpt2-xl checkpoint, and folio's own ways to
write one need more: `folio train --max_iters 0` holds the model with its gradients and optimizer
state (4x the 6.2 GB of weights), `folio import` a gpt2-xl Hugging Face folder to start from.
This script writes the file itself, in folio's format, holding at most one tensor (and the token
embedding, which the file stores twice as the tied head) in memory. Pure Python, no numpy.

    python3 tools/make_random_checkpoint.py --like gpt2.safetensors --size gpt2-xl --out xl.safetensors

--like is a folio checkpoint of a GPT-2 preset model (e.g. `folio import` of any GPT2LMHeadModel
folder): its metadata (config, tokenizer) is kept, with the config's n_layer, n_head and n_embd
set to the size's; its tensor names and shapes are checked against the ones this script writes
for its own size, so that the two stay in step with folio's writer. The weights are random
values of magnitude 2^-7..2^-6 (fp32 values widened from bf16 bit patterns), deterministic in
--seed; the data checksum is stored as folio's writer stores it (the header checksum is left out,
which folio accepts: it checks it only where present).
"""

import argparse
import hashlib
import json
import math
import random
import struct
import sys

SIZES = {  # n_layer, n_head, n_embd (GPT-2's four sizes, as folio's presets)
    "gpt2": (12, 12, 768),
    "gpt2-medium": (24, 16, 1024),
    "gpt2-large": (36, 20, 1280),
    "gpt2-xl": (48, 25, 1600),
}


def read_header(path):
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
    return header.pop("__metadata__"), header


def tensor_shapes(config, vocab_size, lm_head_weight, lm_head_bias):
    """Name -> shape of every tensor folio writes for this config (seed 000's names)."""
    C, L, H, T = config["n_embd"], config["n_layer"], config["n_head"], config["block_size"]
    hs = config["head_size"] or C // H
    F = 4 * C
    shapes = {"token_embedding_table.weight": [vocab_size, C],
              "position_embedding_table.weight": [T, C]}
    if lm_head_weight:
        shapes["lm_head.weight"] = [vocab_size, C]
    for i in range(L):
        b = f"blocks.{i}."
        for which in ("query", "key", "value"):
            for h in range(H):
                shapes[f"{b}sa.heads.{h}.{which}.weight"] = [hs, C]
                if config["qkv_bias"]:
                    shapes[f"{b}sa.heads.{h}.{which}.bias"] = [hs]
        shapes[b + "sa.proj.weight"] = [C, H * hs]
        shapes[b + "ffwd.net.0.weight"] = [F, C]
        shapes[b + "ffwd.net.2.weight"] = [C, F]
        for norm in ("ln1", "ln2"):
            shapes[f"{b}{norm}.weight"] = [C]
        if config["bias"]:
            for name, width in (("ln1", C), ("ln2", C), ("sa.proj", C), ("ffwd.net.0", F),
                                ("ffwd.net.2", C)):
                shapes[f"{b}{name}.bias"] = [width]
    shapes["ln_f.weight"] = [C]
    if config["bias"]:
        shapes["ln_f.bias"] = [C]
    if lm_head_bias:
        shapes["lm_head.bias"] = [vocab_size]
    return shapes


def random_fp32(rng, count):
    """`count` little-endian fp32 values: random bf16 patterns with the exponent of 2^-7."""
    half = bytearray(rng.randbytes(2 * count))
    # bf16's high byte: the random sign, and exponent bits that give magnitudes in [2^-7, 2^-6).
    half[1::2] = half[1::2].translate(bytes((b & 0x80) | 0x3C for b in range(256)))
    out = bytearray(4 * count)
    out[2::4] = half[0::2]
    out[3::4] = half[1::2]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--like", required=True, help="a folio checkpoint of a GPT-2 preset")
    parser.add_argument("--size", required=True, choices=sorted(SIZES))
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    metadata, template = read_header(args.like)
    if metadata.get("format") != "folio-gpt-1":
        sys.exit(f"{args.like} is not a folio model checkpoint (format folio-gpt-1)")
    config = json.loads(metadata["config"])
    vocab_size = template["token_embedding_table.weight"]["shape"][0]
    has_head, has_head_bias = "lm_head.weight" in template, "lm_head.bias" in template
    expected = tensor_shapes(config, vocab_size, has_head, has_head_bias)
    actual = {name: entry["shape"] for name, entry in template.items()}
    if expected != actual or config["torch_names"] != "seed000":
        sys.exit(f"{args.like}: its tensors are not the ones this script writes for its config "
                 "(a model other than a GPT-2 preset?)")

    config["n_layer"], config["n_head"], config["n_embd"] = SIZES[args.size]
    config["head_size"] = 0
    shapes = tensor_shapes(config, vocab_size, has_head, has_head_bias)
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    parameters = sum(e["data_offsets"][1] - e["data_offsets"][0] for n, e in header.items()
                     if n != "lm_head.weight" or not config["tie_weights"]) // 4

    # The data checksum is over all tensors in order: one pass to hash, one to write, drawing
    # each tensor twice from the same seeds rather than holding it.
    def tensor_bytes(index, name):
        if name == "lm_head.weight" and config["tie_weights"]:  # the tied head: the embedding
            index = list(shapes).index("token_embedding_table.weight")
        count = header[name]["data_offsets"][1] // 4 - header[name]["data_offsets"][0] // 4
        return random_fp32(random.Random(args.seed * 1_000_003 + index), count)

    digest = hashlib.sha256()
    for index, name in enumerate(shapes):
        digest.update(tensor_bytes(index, name))
    metadata = dict(metadata, config=json.dumps(config, separators=(",", ":"), sort_keys=True),
                    parameters=str(parameters), data_sha256=digest.hexdigest(), step="-1",
                    train_loss="-1", val_loss="-1")
    metadata.pop("header_sha256", None)
    header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(args.out, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for index, name in enumerate(shapes):
            f.write(tensor_bytes(index, name))
    print(f"wrote {args.out}: {args.size}, {parameters} parameters, "
          f"{(8 + len(text) + offset) / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
