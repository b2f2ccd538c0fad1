"""The CUDA module (src/backend/cuda_module.h): a build with CUDA keeps its CUDA backend in
libfolio_cuda.so beside the binary and loads it only when a run asks for a GPU. With a stand-in
for the NVIDIA driver (a libcuda.so.1 without functions) the whole way to a GPU runs on a machine
without one: the driver found, the module loaded, no device counted.

    python3 test_cuda_module.py FOLIO_BINARY STAND_IN_DRIVER_DIR
"""

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

FAILURES = []
CUDA_LIBRARIES = ("libcuda.", "libcudart", "libcublas", "libnccl", "libfolio_cuda")


def check(name, condition, detail=""):
    print(f"{name}: {'ok' if condition else 'FAIL'}" + (f"\n    {detail}" if not condition else ""))
    if not condition:
        FAILURES.append(name)


def traced(folio, *args, driver_dir=None):
    """Runs folio with the loader's trace (LD_DEBUG=files) and returns the result and the CUDA
    libraries it loaded. The trace goes to a file of its own, so stderr keeps folio's lines."""
    trace_dir = tempfile.mkdtemp(prefix="folio_ld_debug_")
    env = dict(os.environ, LD_DEBUG="files", LD_DEBUG_OUTPUT=os.path.join(trace_dir, "trace"))
    if driver_dir:
        env["LD_LIBRARY_PATH"] = driver_dir + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    result = subprocess.run([folio, *args], capture_output=True, text=True, env=env, timeout=600)
    lines = []
    for name in os.listdir(trace_dir):
        with open(os.path.join(trace_dir, name), errors="replace") as f:
            lines += f.read().splitlines()
    shutil.rmtree(trace_dir)
    # "file=NAME [0];  generating link map": NAME was found and mapped (a failed attempt has no
    # such line). Reported by file name alone.
    mapped = {os.path.basename(line.split("file=")[1].split()[0]) for line in lines
              if "file=" in line and "generating link map" in line}
    loaded = sorted(name for name in mapped if name.startswith(CUDA_LIBRARIES))
    return result, loaded, lines


def error_lines(result):
    return [line for line in result.stderr.splitlines() if line.startswith("folio: error: ")]


def main(folio, driver_dir):
    folio = os.path.abspath(folio)
    quick_bench = ["bench", "--config", "tiny", "--steps", "1", "--warmup", "0"]

    version, loaded, _ = traced(folio, "--version")
    check("--version loads the module, even without a driver, and names its CUDA",
          version.returncode == 0 and "cuda: yes (libfolio_cuda.so: CUDA runtime " in version.stdout
          and "libfolio_cuda.so" in loaded, f"{version.stdout!r}, loaded {loaded}")

    cpu, loaded, trace = traced(folio, *quick_bench, "--device", "cpu", driver_dir=driver_dir)
    check("a --device cpu run maps none of CUDA's libraries, even with a driver there",
          cpu.returncode == 0 and trace and not loaded, f"rc {cpu.returncode}, loaded {loaded}")

    try:
        ctypes.CDLL("libcuda.so.1")
        has_driver = True
    except OSError:
        has_driver = False
    if not has_driver:
        auto, loaded, _ = traced(folio, *quick_bench)
        check("without a driver, --device auto takes the CPU and loads nothing of CUDA's",
              auto.returncode == 0 and '"device":"cpu"' in auto.stdout and not loaded,
              f"rc {auto.returncode}, loaded {loaded}, stderr {auto.stderr!r}")
        cuda, loaded, _ = traced(folio, *quick_bench, "--device", "cuda")
        lines = error_lines(cuda)
        check("without a driver, --device cuda says so in one line and loads nothing of CUDA's",
              cuda.returncode != 0 and len(lines) == 1 and "no CUDA GPU is visible" in lines[0]
              and "no NVIDIA driver" in lines[0]
              and "libcuda.so.1" in lines[0] and "--device cpu" in lines[0] and not loaded,
              f"rc {cuda.returncode}, loaded {loaded}, stderr {cuda.stderr!r}")

    # The stand-in driver shadows a real one too: no GPU, whatever the machine.
    auto, loaded, _ = traced(folio, *quick_bench, driver_dir=driver_dir)
    check("with a driver and no GPU, --device auto asks the module and takes the CPU",
          auto.returncode == 0 and '"device":"cpu"' in auto.stdout
          and "libfolio_cuda.so" in loaded, f"rc {auto.returncode}, loaded {loaded}")
    cuda, loaded, _ = traced(folio, *quick_bench, "--device", "cuda", driver_dir=driver_dir)
    lines = error_lines(cuda)
    check("with a driver and no GPU, --device cuda loads the module and says no GPU is visible",
          cuda.returncode != 0 and len(lines) == 1 and "no CUDA GPU is visible" in lines[0]
          and "libfolio_cuda.so" in loaded, f"rc {cuda.returncode}, loaded {loaded}, "
          f"stderr {cuda.stderr!r}")

    # folio copied without its module: the error names the file and the fix.
    alone_dir = tempfile.mkdtemp(prefix="folio_alone_")
    alone = os.path.join(alone_dir, "folio")
    shutil.copy2(folio, alone)
    missing, loaded, _ = traced(alone, *quick_bench, "--device", "cuda", driver_dir=driver_dir)
    lines = error_lines(missing)
    check("a binary copied without libfolio_cuda.so names the missing module, the fix and what "
          "the loader said", missing.returncode != 0 and len(lines) == 1
          and "libfolio_cuda.so" in lines[0] and "neither beside the folio binary" in lines[0]
          and alone_dir in lines[0] and "the loader said: " in lines[0]
          and "cannot open shared object file" in lines[0],
          f"rc {missing.returncode}, stderr {missing.stderr!r}")
    shutil.rmtree(alone_dir)

    return summary()


def summary():
    """The exit code of a script of check()s, after a line saying how it went."""
    if FAILURES:
        print(f"{len(FAILURES)} failed: {FAILURES}")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
