"""Where the CPU of a command goes, by program, every process counted (issue 30, item 6): the
suite is bound by the CPU of the 2-core machine, and a spec's time says little about which part
of it (a CLI's start-up, our own Python, Docker) is the cost.

    sudo .venv/bin/python benchmarks/suite_cpu.py -- bash scripts/test.sh tests/test_x.py
    .venv/bin/python benchmarks/suite_cpu.py --read FILE     # a file written by `accton FILE`
                                                             # or kept by `--keep FILE`

It turns on the kernel's process accounting (acct(2), root only; it replaces any accounting file
already on) into a temporary file, runs the command, turns it off, and sums each ended process's
user and system time by its program name: containers' processes too (one kernel), and the
processes a spec starts and ends. Long-lived daemons end after the command, so the Docker daemon
and containerd are read from /proc before and after. Printed beside the total: the wall time and
the load average.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RECORD = struct.Struct("=BBHIIIIIIf8H16s")  # struct acct_v3 (linux/acct.h): 64 bytes
TICKS = 100  # AHZ
DAEMONS = ("dockerd", "containerd")


def comp_t(value: int) -> int:
    """The kernel's 13-bit mantissa, 3-bit base-8 exponent."""
    return (value & 0x1FFF) << (3 * (value >> 13))


def read(path: Path) -> dict[str, tuple[int, float]]:
    """Program name -> (processes, CPU seconds)."""
    found: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    data = path.read_bytes()
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        fields = RECORD.unpack_from(data, offset)
        if fields[1] != 3:  # not a v3 record
            continue
        utime, stime, comm = fields[10], fields[11], fields[18]
        name = comm.split(b"\0", 1)[0].decode(errors="replace") or "?"
        entry = found[name]
        entry[0] += 1
        entry[1] += (comp_t(utime) + comp_t(stime)) / TICKS
    return {name: (int(n), cpu) for name, (n, cpu) in found.items()}


def daemon_cpu() -> dict[str, float]:
    """CPU seconds the long-lived daemons have used so far."""
    cpu: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        pid = entry.name
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name in DAEMONS:
            fields = stat[stat.rindex(")") + 2 :].split()
            cpu[name] = cpu.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / TICKS
    return cpu


def machine_cpu() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine since boot, from /proc/stat: the truth the
    accounting misses, which records a process's time in whole ticks (a `git rev-parse` of 3 ms
    counts as none) and none of the kernel's own work."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    user, nice, system, idle, iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) / TICKS, (idle + iowait) / TICKS


def report(
    programs: dict[str, tuple[int, float]],
    daemons: dict[str, float],
    top: int,
    machine: tuple[float, float] | None = None,
) -> None:
    total = sum(cpu for _, cpu in programs.values()) + sum(daemons.values())
    rows = [(cpu, n, name) for name, (n, cpu) in programs.items()]
    rows += [(cpu, 1, f"{name} (daemon)") for name, cpu in daemons.items()]
    if machine is not None:
        busy, idle = machine
        print(
            f"the machine: {busy:.1f} CPU-s busy, {idle:.1f} idle; "
            f"{busy - total:.1f} s of it not in the accounting (short processes, the kernel)"
        )
    print(f"CPU in all: {total:.1f} s")
    for cpu, n, name in sorted(rows, reverse=True)[:top]:
        share = 100 * cpu / total if total else 0.0
        print(f"  {cpu:8.1f} s  {share:5.1f} %  {n:6d} processes  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--read", type=Path, help="an accounting file written elsewhere")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="keep the accounting file here, to read again")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args()
    if args.read:
        report(read(args.read), {}, args.top)
        return
    if not args.command:
        parser.error("give a command after --, or --read FILE")
    libc = ctypes.CDLL(None, use_errno=True)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pacct"
        path.touch()
        if libc.acct(str(path).encode()) != 0:
            sys.exit(f"acct(2) refused: {os.strerror(ctypes.get_errno())} (it needs root)")
        before, began, stat = daemon_cpu(), time.monotonic(), machine_cpu()
        try:
            code = subprocess.call(args.command)
        finally:
            libc.acct(None)
        wall, after, stat_after = time.monotonic() - began, daemon_cpu(), machine_cpu()
        daemons = {name: after[name] - before.get(name, 0.0) for name in after}
        machine = (stat_after[0] - stat[0], stat_after[1] - stat[1])
        print(f"\nexit {code}, wall {wall:.1f} s, load {os.getloadavg()}")
        report(read(path), daemons, args.top, machine)
        if args.keep:
            shutil.copyfile(path, args.keep)
    sys.exit(code)


if __name__ == "__main__":
    main()
