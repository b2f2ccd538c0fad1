"""folio against PyTorch on the same weights, batch and dropout masks.

Reads what folio_torch_dump wrote, runs the seed's model (tools/folio_torch.py) in PyTorch with
folio's dropout masks, and checks, per tensor, ||folio - torch|| / ||torch|| in fp32:

  - the logits, the loss and every parameter gradient: below 1e-5 (the key biases of qkv_bias,
    whose exact gradient is zero: both sides below 1e-5 of the whole gradient's norm);
  - the weights after one torch.optim.AdamW step (after clip_grad_norm_ when the config clips)
    taken from folio's gradients: below 1e-5 (the optimizer itself, exactly);
  - the same step taken from PyTorch's own gradients (end to end), per element, within what the
    gradient difference explains (see end_to_end_bound). Adam's first step moves each weight by
    lr * g / (|g| + eps): a gradient element near eps = 1e-8, where the fp32 summation order of
    two correct implementations (oneDNN's AVX2 and AVX-512 kernels differ) is a sizeable part of
    it, moves by a visibly different amount, so no tolerance on a tensor's norm holds on every
    CPU. The largest share of its bound any element uses is printed: close to 1 by construction
    wherever two gradients nearly agree (the bound is then the first-order difference itself,
    plus the rounding slack); a wrong step exceeds it.

ReLU's kink: a pre-activation within fp32 rounding of zero (two correct summation orders differ by
~1e-6 there) may land on either side in folio and in PyTorch, and one such element flips a hidden
unit's gradient for one position, which is enough to move the gradients of every earlier block by
2-5e-4 (seen once in 4.7M pre-activations of shakespeare_char: |fc| = 6.9e-7, in a build at -O2).
So where |fc| < KINK_BAND the PyTorch model takes folio's side (folio dumps its pre-activations);
everywhere else the two must agree on the sign, which is checked.

    python3 compare_with_torch.py DUMP_DIR
"""

import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import folio_torch  # noqa: E402

TOLERANCE = 1e-5
# A key bias (qkv_bias) adds q_i . b to every score of query row i, which softmax ignores: its
# gradient is zero but for rounding, so a relative error means nothing there. Both sides must
# instead be zero to within TOLERANCE of the whole gradient. Seed 000 calls folio's keys `key`,
# seed 004 `q` (its scores are k @ q^T).
KEY_BIAS = re.compile(r"\.heads\.\d+\.(key|q)\.bias$")
KINK_BAND = 1e-5  # ten times the largest rounding difference of an O(1) pre-activation seen


class MaskedDropout(torch.nn.Module):
    """Dropout that applies a given mask: x * mask / (1 - p), as nn.Dropout does in training."""

    def __init__(self, mask, p):
        super().__init__()
        self.mask, self.p = mask, p

    def forward(self, x):
        return x * self.mask / (1.0 - self.p)


class ReluOnFolioSideOfTheKink(torch.nn.Module):
    """ReLU whose mask is x > 0, except where |x| < KINK_BAND: there folio's pre-activation's sign.
    Counts the elements outside the band where folio's sign differs (a real disagreement)."""

    def __init__(self, folio_preactivation):
        super().__init__()
        self.folio = folio_preactivation
        self.in_band = 0
        self.disagreements = 0

    def forward(self, x):
        near_kink = x.detach().abs() < KINK_BAND
        folio_positive = self.folio > 0
        torch_positive = x.detach() > 0
        self.in_band = int(near_kink.sum())
        self.disagreements = int(((folio_positive != torch_positive) & ~near_kink).sum())
        mask = torch.where(near_kink, folio_positive, torch_positive)
        return x * mask.to(x.dtype)


def end_to_end_bound(folio_grad, torch_grad, updated, learning_rate, eps):
    """Per element, how far folio's AdamW step (from folio's gradient a) and PyTorch's (from its own
    gradient b) may land apart. After bias correction the first step is
    w' = w (1 - lr wd) - lr f(g) with f(g) = g / (|g| + eps), the same w and decay on both sides,
    so |w'_folio - w'_torch| = lr |f(a) - f(b)| plus rounding. By the mean value theorem
    |f(a) - f(b)| <= |a - b| max f' over [a, b], with f'(x) = eps / (|x| + eps)^2 largest at the
    smallest |x| in [a, b] (0 when a and b differ in sign), and never more than 2 (f is in
    (-1, 1)). Rounding: f is a handful of fp32 operations on each side (4e-6, about 32 ulps in
    all), and each side rounds w' (two ulps of w' each). a and b are the gradients after
    clipping."""
    a, b = folio_grad.double(), torch_grad.double()
    nearest = torch.where(a * b > 0, torch.minimum(a.abs(), b.abs()), torch.zeros_like(a))
    through_f = torch.clamp((a - b).abs() * eps / (nearest + eps) ** 2, max=2.0)
    ulp = torch.finfo(torch.float32).eps * updated.double().abs()
    return learning_rate * (through_f + 4e-6) + 4 * ulp


def relative_error(folio, torch_value):
    folio, torch_value = folio.double(), torch_value.double()
    return ((folio - torch_value).norm() / torch_value.norm()).item()


def main(dump_dir):
    model, cfg, vocab = folio_torch.load_folio_checkpoint(os.path.join(dump_dir, "weights.safetensors"))
    expected, metadata = folio_torch.read_safetensors(os.path.join(dump_dir, "expected.safetensors"))
    model.train()
    torch.manual_seed(0)
    # Every dropout that drops (the blocks' at `dropout`, the embeddings' at `embedding_dropout`)
    # applies folio's mask for it.
    for name, module in list(model.named_modules()):
        if isinstance(module, torch.nn.Dropout) and module.p > 0:
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name)
            masked = MaskedDropout(expected["mask." + name], module.p)
            if isinstance(parent, torch.nn.Sequential):
                parent[int(child)] = masked
            else:
                setattr(parent, child, masked)
    assert not any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules()), \
        "unmasked dropout"
    kinks = {}
    if cfg["activation"] == "relu":
        for l in range(cfg["n_layer"]):
            block = model.blocks[l]
            # seed 000 calls the feed-forward module ffwd, seed 004 feedforward (torch_names)
            ffwd = block.feedforward if hasattr(block, "feedforward") else block.ffwd
            kinks[l] = ReluOnFolioSideOfTheKink(expected[f"preactivation.blocks.{l}.ffwd.net.0"])
            ffwd.net[1] = kinks[l]

    parameters = sum(p.numel() for p in model.parameters())
    failures = []
    checks = 0

    worst = {}

    def check(name, folio_value, torch_value):
        nonlocal checks
        checks += 1
        error = relative_error(folio_value, torch_value)
        worst["strict"] = max(worst.get("strict", 0.0), error)
        if not error < TOLERANCE:
            failures.append(f"{name}: relative error {error:.3e} (tolerance {TOLERANCE:.0e})")

    def check_zero(name, folio_value, torch_value, total):
        nonlocal checks
        checks += 1
        for side, value in (("folio", folio_value), ("torch", torch_value)):
            share = value.double().norm().item() / total
            if not share < TOLERANCE:
                failures.append(f"{name}: {side}'s gradient is {share:.3e} of the whole gradient's "
                                f"norm; it must be zero (rounding only)")

    if int(metadata["parameters"]) != parameters:
        failures.append(f"parameter count: folio {metadata['parameters']}, torch {parameters}")

    x = expected["inputs"].long()
    y = expected["targets"].long()
    logits, loss = model(x, y)
    for l, relu in kinks.items():
        if relu.disagreements:
            failures.append(f"blocks.{l} ReLU: {relu.disagreements} pre-activations at least "
                            f"{KINK_BAND:g} from zero on the other side of it in folio")
    near_kink = sum(relu.in_band for relu in kinks.values())
    check("logits", expected["logits"], logits.detach())
    check("loss", expected["loss"], loss.detach().reshape(1))
    loss.backward()

    named = dict(model.named_parameters())
    total = torch.cat([param.grad.flatten() for param in named.values()]).double().norm().item()
    for name, param in named.items():
        if KEY_BIAS.search(name):
            check_zero("grad " + name, expected["grad." + name], param.grad, total)
        else:
            check("grad " + name, expected["grad." + name], param.grad)

    initial = {name: param.detach().clone() for name, param in named.items()}
    torch_grads = {name: param.grad.clone() for name, param in named.items()}

    def adamw_step(grads):
        with torch.no_grad():
            for name, param in named.items():
                param.copy_(initial[name])
                param.grad = grads[name].clone()
        decay, no_decay = [], []
        for name, param in named.items():
            (decay if cfg["decay_params"] == "all" or param.dim() >= 2 else no_decay).append(param)
        groups = [{"params": decay, "weight_decay": cfg["weight_decay"]}]
        if no_decay:
            groups.append({"params": no_decay, "weight_decay": 0.0})
        optimizer = torch.optim.AdamW(groups, lr=float(metadata["learning_rate"]),
                                      betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["adam_eps"])
        if cfg["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        clipped = {name: param.grad.clone() for name, param in named.items()}
        optimizer.step()
        return {name: param.detach().clone() for name, param in named.items()}, clipped

    from_folio, folio_clipped = adamw_step({name: expected["grad." + name] for name in named})
    for name in named:
        check("updated (folio grads) " + name, expected["updated." + name], from_folio[name])
    end_to_end, torch_clipped = adamw_step(torch_grads)
    learning_rate = float(metadata["learning_rate"])
    for name in named:
        checks += 1
        got, want = expected["updated." + name], end_to_end[name]
        worst["end_to_end"] = max(worst.get("end_to_end", 0.0), relative_error(got, want))
        bound = end_to_end_bound(folio_clipped[name], torch_clipped[name], want, learning_rate,
                                 cfg["adam_eps"])
        share = (got.double() - want.double()).abs() / bound
        worst["end_to_end_share"] = max(worst.get("end_to_end_share", 0.0), share.max().item())
        if not bool((share <= 1).all()):
            i = int(share.flatten().argmax())
            failures.append(f"updated (end to end) {name}: element {i} differs by "
                            f"{(got - want).flatten()[i].item():.3e}, {share.flatten()[i].item():.2f} "
                            f"times what its gradient difference explains")

    print(json.dumps({"parameters": parameters, "checks": checks, "loss": loss.item(),
                      "worst_strict": worst.get("strict"), "worst_end_to_end": worst.get("end_to_end"),
                      "worst_share_of_end_to_end_bound": worst.get("end_to_end_share"),
                      "relu_inputs_within_kink_band": near_kink if kinks else None,
                      "failures": len(failures)}))
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
