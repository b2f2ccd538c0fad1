"""Every file the docs point at exists: the README's and docs/*.md's relative links, and each path
of the repository they name (src/..., tests/..., bench/..., in backticks or not). And every
section the code and the docs send a reader to (README "Sharing the CPU", docs/gpu.md's "...")
is still in that file. The README sends readers to docs/ for the measurements and to the code for
the details; a renamed file or a moved section must not leave them at a dead end.

    python3 test_doc_paths.py REPOSITORY_ROOT

A path component in capitals is a placeholder (tests/fuzz/corpus/TARGET) and matches any name;
src/x.{h,cpp} names both files.
"""
import glob
import os
import re
import sys

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
PATH = re.compile(r"(?<![\w/.-])((?:src|tests|bench|tools|scripts|docs|configs|\.ci)/"
                  r"[A-Za-z0-9_./*{},-]*[A-Za-z0-9_*}])")


def as_pattern(path):
    """The path with its placeholder components (all capitals) as globs."""
    def placeholder(part):
        stem, dot, rest = part.partition(".")
        return "*" + dot + rest if len(stem) > 1 and stem.isupper() else part
    return "/".join(placeholder(p) for p in path.split("/"))


def expanded(path):
    """src/x.{h,cpp} as src/x.h and src/x.cpp (one pair of braces, as the docs write them)."""
    braces = re.match(r"(.*)\{([^}]*)\}(.*)", path)
    if not braces:
        return [path]
    head, choices, tail = braces.groups()
    return [head + choice + tail for choice in choices.split(",")]


def dead_ends(root, document):
    text = open(os.path.join(root, document), encoding="utf-8").read()
    here = os.path.dirname(os.path.join(root, document))
    found = []
    for match in LINK.finditer(text):
        target = match.group(1)
        if "://" in target or target.startswith("mailto:"):
            continue
        if not os.path.exists(os.path.normpath(os.path.join(here, target))):
            found.append(f"{document}: link to {target}, which does not exist")
    for match in PATH.finditer(text):
        for path in expanded(match.group(1)):
            if not glob.glob(os.path.join(root, as_pattern(path))):
                found.append(f"{document}: names {path}, which does not exist")
    return found


# README "Section", README's "Section", (README, "Section"), docs/gpu.md "Section"
SECTION = re.compile(r"(README|docs/[a-z_]+\.md)(?:\.md)?(?:'s)?,? \(?\"([^\"]+)\"")
SOURCES = ("src", "tests", "bench", "tools", "scripts", "docs", ".ci")


def missing_sections(root):
    """References to a section of a document, from every source file, that it no longer holds."""
    files = [os.path.join(root, name) for name in ("README.md", "CMakeLists.txt")]
    for top in SOURCES:
        for folder, _, names in os.walk(os.path.join(root, top)):
            files += [os.path.join(folder, name) for name in names]
    found = []
    for path in files:
        if os.path.samefile(path, __file__):  # its own examples
            continue
        try:
            text = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        for match in SECTION.finditer(text.replace("\n//", " ").replace("\n#", " ")):
            document, section = match.groups()
            target = os.path.join(root, "README.md" if document == "README" else document)
            section = " ".join(section.split())
            if not os.path.exists(target):
                found.append(f"{os.path.relpath(path, root)}: refers to {document}, which does not exist")
            elif section not in " ".join(open(target, encoding="utf-8").read().split()):
                found.append(f"{os.path.relpath(path, root)}: refers to {document} \"{section}\", "
                             "which it does not hold")
    return found


def main():
    root = sys.argv[1]
    documents = ["README.md"] + sorted(
        os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    failures = [line for document in documents for line in dead_ends(root, document)]
    failures += missing_sections(root)
    for line in failures:
        print(line)
    print(f"{len(documents)} documents, {len(failures)} dead ends")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
