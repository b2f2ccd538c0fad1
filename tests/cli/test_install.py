"""`cmake --install BUILD --prefix PREFIX` gives a folio that runs from PREFIX/bin with nothing of
the build beside it: the binary, and in a build with CUDA the module in PREFIX/lib/folio/, which
the installed binary finds there (README "Set-up").

    python3 test_install.py CMAKE BUILD_DIR WITH_CUDA(ON|OFF) TEXT
"""

import os
import shutil
import subprocess
import sys
import tempfile

from test_cuda_module import check, summary, traced


def main(cmake, build_dir, with_cuda, text):
    prefix = tempfile.mkdtemp(prefix="folio_install_")
    try:
        install = subprocess.run([cmake, "--install", build_dir, "--prefix", prefix],
                                 capture_output=True, text=True, timeout=300)
        check("cmake --install succeeds", install.returncode == 0, install.stderr)
        installed = sorted(os.path.relpath(os.path.join(folder, name), prefix)
                           for folder, _, names in os.walk(prefix) for name in names)
        expected = ["bin/folio"] + (["lib/folio/libfolio_cuda.so"] if with_cuda else [])
        check("it installs the binary and, with CUDA, the module in lib/folio",
              [p.replace("lib64/", "lib/") for p in installed] == expected, f"{installed}")
        folio = os.path.join(prefix, "bin", "folio")

        # The loader's trace names the files it maps: the module must come from the prefix.
        version, _, trace = traced(folio, "--version")
        mapped = [line.split("file=")[1].split()[0] for line in trace
                  if "file=" in line and "generating link map" in line]
        check("the installed folio runs", version.returncode == 0 and version.stdout.startswith(
            "folio "), f"rc {version.returncode}, {version.stderr!r}")
        if with_cuda:
            modules = [path for path in mapped if path.endswith("libfolio_cuda.so")]
            check("the installed folio loads the installed CUDA module",
                  "cuda: yes (libfolio_cuda.so" in version.stdout and len(modules) == 1
                  and modules[0].startswith(prefix), f"{version.stdout!r}, mapped {modules}")

        out_dir = os.path.join(prefix, "run")
        train = subprocess.run([folio, "train", "--config", "tiny", "--data", text, "--max_iters",
                                "3", "--eval_interval", "2", "--eval_iters", "1", "--device", "cpu",
                                "--out_dir", out_dir, "--quiet"], capture_output=True, text=True,
                               timeout=300)
        check("the installed folio trains", train.returncode == 0 and os.path.exists(
            os.path.join(out_dir, "ckpt.safetensors")), f"rc {train.returncode}, {train.stderr!r}")
    finally:
        shutil.rmtree(prefix)
    return summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3] == "ON", sys.argv[4]))
