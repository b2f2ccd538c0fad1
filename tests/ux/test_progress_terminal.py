"""The progress display as people see it, on `folio train` itself (tiny, 300 steps): under a real
pseudo-terminal (the status line redrawn in place), through a pipe (plain lines), and with
--quiet (neither). (folio_progress_demo, beside this file, shows the same display on a simulated
clock for watching by hand.)

    python3 test_progress_terminal.py FOLIO DATA WORK_DIR
"""

import fcntl
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios

from recorded_run import report

COLUMNS = 90
STEPS = 300
ERASE = "\x1b[K"


def run_in_terminal(command):
    """Runs `command` with stdout and stderr on a pseudo-terminal COLUMNS wide; returns what it
    wrote, with the terminal's own "\\r\\n" for each newline turned back into "\\n"."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
    environment = dict(os.environ, TERM="xterm-256color", LANG="C.UTF-8")
    environment.pop("LC_ALL", None)
    environment.pop("LC_CTYPE", None)
    process = subprocess.Popen(command, stdout=slave, stderr=slave, env=environment)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert process.wait() == 0, "folio train failed:\n" + b"".join(chunks).decode()[-2000:]
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def screen_lines(output):
    """What stays on screen: for each line, the text after its last redraw."""
    lines = []
    for line in output.split("\n"):
        segments = line.split("\r")
        visible = segments[-1]
        lines.append(visible.replace(ERASE, ""))
    return [line for line in lines if line]


def check_terminal(output, failures):
    if ERASE not in output or "\r" not in output:
        failures.append("terminal: no status line redrawn in place")
    if re.search(r"^iter \d+", output, re.M):
        failures.append("terminal: plain progress lines on a terminal")
    segments = re.split(r"[\r\n]", output)
    statuses = [s.replace(ERASE, "") for s in segments if re.match(r"\s*\d+/%d " % STEPS, s)]
    counts = [int(re.match(r"\s*(\d+)/", s).group(1)) for s in statuses]
    if counts != sorted(counts) or not counts or counts[-1] != STEPS:
        failures.append(f"terminal: step counts {counts[:5]}...{counts[-5:]} do not climb "
                        f"to {STEPS}")
    too_wide = [s for s in statuses if len(s) >= COLUMNS]
    if too_wide:
        failures.append(f"terminal: status wider than {COLUMNS - 1} columns: {too_wide[0]!r}")
    if not any("\u2588" in s for s in statuses):
        failures.append("terminal: no Unicode bar under a UTF-8 locale")
    final = screen_lines(output)
    eval_line = r"step \d+: train loss [\d.]+, val loss [\d.]+"
    eval_lines = [line for line in final if re.fullmatch(eval_line, line)]
    if len(eval_lines) != 4:
        failures.append(f"terminal: {len(eval_lines)} whole eval lines on screen, expected 4")
    finished = [l for l in final if l.startswith(f"{STEPS}/{STEPS} ")]
    if len(finished) != 1 or "100%" not in finished[0] or "done in" not in finished[0]:
        failures.append(f"terminal: the finished status does not stay on screen: {finished}")
    if not final[-1].startswith(f"trained {STEPS} steps in "):
        failures.append(f"terminal: last line {final[-1]!r}")


def check_plain(output, failures):
    if "\r" in output or "\x1b" in output:
        failures.append("plain: control characters in a pipe")
    iters = re.findall(r"^iter (\d+)/%d: loss [\d.]+, lr [\d.e+-]+, [\d.]+ ms/step, \d+ tokens/s, "
                       r"MFU [\d.]+%%, (?:ETA|done in) [\d:]+$" % STEPS, output, re.M)
    if not iters or iters[0] != "10" or iters[-1] != str(STEPS) or len(iters) > STEPS // 10:
        failures.append(f"plain: iter lines at steps {iters}")
    if len(re.findall(r"^step \d+: train loss", output, re.M)) != 4:
        failures.append("plain: eval lines")


def check_quiet(output, label, failures):
    if "\r" in output or "\x1b" in output or re.search(r"^iter |^preparing", output, re.M):
        failures.append(f"quiet ({label}): progress printed: {output[:200]!r}")
    if len(re.findall(r"^step \d+: train loss", output, re.M)) != 4:
        failures.append(f"quiet ({label}): the eval lines are missing")


def main(folio, data, work):
    shutil.rmtree(work, ignore_errors=True)
    runs = iter(range(100))

    def command(*extra):
        out_dir = os.path.join(work, f"run{next(runs)}")
        return [folio, "train", "--config", "tiny", "--data", data, "--out_dir", out_dir,
                f"--max_iters={STEPS}", "--eval_interval=100", "--eval_iters=2",
                "--sample_tokens=0", "--threads=1"] + list(extra)

    failures = []
    check_terminal(run_in_terminal(command()), failures)
    check_plain(subprocess.run(command(), capture_output=True, text=True, check=True).stdout,
                failures)
    check_quiet(run_in_terminal(command("--quiet")).replace("\r", ""), "terminal", failures)
    check_quiet(subprocess.run(command("--quiet"), capture_output=True, text=True,
                               check=True).stdout, "pipe", failures)
    return report(failures)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
