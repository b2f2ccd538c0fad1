"""folio's AdamW against torch.optim.AdamW over several steps, on folio's own gradients.

Reads what `folio_optimizer_dump adamw` wrote (the initial weights; for each step the gradients
before clipping, and folio's weights and two moments after it), hands torch.optim.AdamW the same
gradients (through torch.nn.utils.clip_grad_norm_ when the config clips) at each step's learning
rate, and compares per tensor, per step, ||folio - torch|| / ||torch|| < 1e-5 for exp_avg,
exp_avg_sq and the weights. Weight decay goes to every parameter (decay_params = all, the seed)
or to the tensors of two or more dimensions (matrices, nanoGPT), as PyTorch is told here from the
tensors' shapes, not from folio's layout. One step cannot see the betas (after bias correction the
first step is lr g / (|g| + eps) for any betas) nor the bias correction; from the second step on
both change the moments or the update. A failure names the step, the quantity and the tensor,
and says which part of AdamW the pattern points to.

    python3 compare_adamw.py DUMP_DIR
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import folio_torch  # noqa: E402

TOLERANCE = 1e-5


def relative_error(folio, torch_value):
    folio, torch_value = folio.double(), torch_value.double()
    return ((folio - torch_value).norm() / torch_value.norm()).item()


def diagnosis(wrong, decayed, undecayed):
    """Which part of AdamW the set of wrong (quantity, tensor) pairs of one step points to."""
    quantities = {quantity for quantity, _ in wrong}
    if "exp_avg" in quantities and "exp_avg_sq" not in quantities:
        return "the first moment (beta1)"
    if "exp_avg_sq" in quantities and "exp_avg" not in quantities:
        return "the second moment (beta2)"
    if "exp_avg" in quantities:
        return "both moments (betas swapped, or the gradients clipped differently)"
    tensors = {name for _, name in wrong}
    # Only decayed, or only undecayed tensors wrong (a zero bias decays to zero, so not all of a
    # group need show it): the decay. A wrong update from the moments touches both groups.
    if decayed and undecayed and (tensors <= decayed or tensors <= undecayed):
        return "weight decay (applied to the wrong parameters, or with the wrong factor)"
    return "the update from the moments (bias correction, learning rate or eps)"


def main(dump_dir):
    tensors, metadata = folio_torch.read_safetensors(os.path.join(dump_dir, "adamw.safetensors"))
    cfg = json.loads(metadata["config"])
    learning_rates = [float(rate) for rate in metadata["learning_rates"].split(",")]
    names = [name[len("weights.0."):] for name in tensors if name.startswith("weights.0.")]
    if cfg["tie_weights"]:
        names.remove("lm_head.weight")  # a copy of the token embedding, not a parameter
    params = {name: torch.nn.Parameter(tensors["weights.0." + name].clone()) for name in names}
    decayed = {name for name, p in params.items()
               if cfg["decay_params"] == "all" or p.dim() >= 2}
    undecayed = set(names) - decayed
    groups = [{"params": [params[n] for n in names if n in decayed],
               "weight_decay": cfg["weight_decay"]}]
    if undecayed:
        groups.append({"params": [params[n] for n in names if n in undecayed],
                       "weight_decay": 0.0})
    optimizer = torch.optim.AdamW(groups, lr=learning_rates[0], betas=(cfg["beta1"], cfg["beta2"]),
                                  eps=cfg["adam_eps"])

    failures = []
    worst = 0.0
    clipped_steps = 0
    for step, learning_rate in enumerate(learning_rates, start=1):
        for name, p in params.items():
            p.grad = tensors[f"grad.{step}.{name}"].clone()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate
        if cfg["grad_clip"] > 0:
            norm = torch.nn.utils.clip_grad_norm_(list(params.values()), cfg["grad_clip"])
            clipped_steps += int(norm > cfg["grad_clip"])
        optimizer.step()
        wrong = []
        for name, p in params.items():
            state = optimizer.state[p]
            for quantity, value in (("exp_avg", state["exp_avg"]),
                                    ("exp_avg_sq", state["exp_avg_sq"]), ("weights", p.detach())):
                error = relative_error(tensors[f"{quantity}.{step}.{name}"], value)
                worst = max(worst, error)
                if not error < TOLERANCE:
                    wrong.append((quantity, name, error))
        if wrong:
            quantity, name, error = wrong[0]
            failures.append(f"step {step}: {len(wrong)} of {3 * len(names)} tensor comparisons differ, "
                            f"first {quantity} of {name} "
                            f"(relative error {error:.3e}, tolerance {TOLERANCE:.0e}); points to "
                            + diagnosis([(q, n) for q, n, _ in wrong], decayed, undecayed))
            break  # later steps only repeat it
    if cfg["grad_clip"] > 0 and clipped_steps == 0:
        failures.append(f"grad_clip {cfg['grad_clip']} never clipped: choose a smaller one")
    print(json.dumps({"steps": len(learning_rates), "tensors": len(names),
                      "decayed": len(decayed), "clipped_steps": clipped_steps,
                      "worst_relative_error": worst}))
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
