"""The checks every refused `folio` command must pass, shared by test_bad_input.py,
test_hostile_checkpoints.py and test_disk_full.py: a non-zero exit and stderr that is exactly one
`folio: error:` line holding the expected text."""


def refusal_problems(result, expected):
    """What is wrong with the refusal in `result` (a subprocess.CompletedProcess run with
    text=True); an empty list when nothing is."""
    lines = result.stderr.strip().splitlines()
    problems = []
    if result.returncode == 0:
        problems.append("exit code 0")
    if len(lines) != 1:
        problems.append(f"{len(lines)} stderr lines")
    elif not lines[0].startswith("folio: error: ") or expected not in lines[0]:
        problems.append(f"message {lines[0]!r} lacks {expected!r}")
    return problems


def report(name, result, problems, failures):
    """Prints one case's outcome with its stderr, and counts it in `failures` when it failed."""
    status = "ok" if not problems else "FAIL " + "; ".join(problems)
    print(f"{name}: {status}\n    {result.stderr.strip()[:1000]}")
    if problems:
        failures.append(name)
