"""Every error example in the docs is what folio prints. Checks each ```console block placed
right after a line `<!-- checked: tests/ux/test_documented_errors.py -->` in the given Markdown
files: its `$ ` lines run in order, in one fresh folder, with the folio under test first on PATH,
and each must print exactly the lines that follow it (stdout and stderr together); an example
showing `folio: error:` must also fail.

    python3 test_documented_errors.py FOLIO_BINARY FILE.md [FILE.md ...]
"""

import os
import subprocess
import sys
import tempfile

from recorded_run import report

MARKER = "<!-- checked: tests/ux/test_documented_errors.py -->"
MINIMUM_EXAMPLES = 10  # docs/config_errors.md alone has more; fewer means the parsing broke


def checked_blocks(path):
    """The checked console blocks of a Markdown file, each a list of (command, expected lines)."""
    lines = open(path, encoding="utf-8").read().splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```console":
            raise ValueError(f"{path}:{i + 1}: the marker must be followed by ```console")
        examples = []
        for body in lines[i + 2:]:
            if body.strip() == "```":
                break
            if body.startswith("$ "):
                examples.append((body[2:], []))
            elif examples:
                examples[-1][1].append(body)
        blocks.append(examples)
    return blocks


def main(folio, documents):
    environment = dict(os.environ, PATH=os.path.dirname(os.path.abspath(folio)) + os.pathsep +
                       os.environ.get("PATH", ""))
    failures, checked = [], 0
    for document in documents:
        for block in checked_blocks(document):
            folder = tempfile.mkdtemp(prefix="folio_documented_errors_")
            for command, expected in block:
                result = subprocess.run(["sh", "-c", command], cwd=folder, env=environment,
                                        capture_output=True, text=True)
                printed = (result.stdout + result.stderr).splitlines()
                checked += 1
                if printed != expected:
                    failures.append(f"{os.path.basename(document)}: `{command}` printed "
                                    f"{printed!r}, the docs show {expected!r}")
                elif any(l.startswith("folio: error:") for l in expected) and not result.returncode:
                    failures.append(f"{os.path.basename(document)}: `{command}` exited 0")
    print(f"{checked} documented examples checked")
    if checked < MINIMUM_EXAMPLES:
        failures.append(f"only {checked} examples found in {documents}")
    return report(failures)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
