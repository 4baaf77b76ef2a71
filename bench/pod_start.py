"""What starting a pod costs the local runtime: N ``sleep 60`` pods, with and without its launcher.

One ``LocalRuntime`` (no GPUs, limits off) starts N single-pod workloads one after the other, as
a worker does when a burst of Jobs lands on it, first with its pod launcher (each pod's
``pod_init`` forked by one long-lived process, the default) and then without (a ``python -I -S
pod_init.pyc`` started per pod, what a runtime does where no launcher runs). Printed per mode:

- pods started per second (the calls to ``start``, one after the other);
- CPU per pod of the runtime's own process (user and system apart: system time is mostly the
  kernel creating each pod's directories and files, which depends on the disk) and of the
  launcher;
- CPU per pod of the whole machine over the starts and one second after them (``/proc/stat``:
  the pods' own starts included), meaningful only on an otherwise idle machine;
- how long stopping them all took (``shutdown`` with no grace: each pod's process tree found
  and killed), and the runtime's CPU for it per pod.

``--dir`` chooses where the runtime's directory goes (default: the system's temporary
directory; ``/dev/shm`` shows the cost without a disk).

Usage: python bench/pod_start.py [--pods N] [--dir DIR] [--repeat K]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import psutil

from gpuaas.runtimes.base import PodSpec
from gpuaas.runtimes.local import LocalRuntime
from machine import disk_speed, python_speed


def _machine_cpu() -> float:
    """CPU seconds the whole machine has spent busy since boot (user, nice, system, irq)."""
    with open("/proc/stat", encoding="ascii") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6]
    return busy / os.sysconf("SC_CLK_TCK")


def run(pods: int, directory: str | None, launcher: bool) -> str:
    with tempfile.TemporaryDirectory(dir=directory) as root:
        runtime = LocalRuntime(Path(root), [], enforce_limits=False, launcher=launcher)
        try:
            me = psutil.Process()
            helper = runtime._launcher
            helper_proc = psutil.Process(helper.pid) if helper is not None else None
            mine0 = me.cpu_times()
            helper0 = helper_proc.cpu_times() if helper_proc else None
            machine0 = _machine_cpu()
            started = time.monotonic()
            for i in range(pods):
                runtime.start(f"bench/w{i}", [PodSpec("p-0", ("sleep", "60"))])
            elapsed = time.monotonic() - started
            time.sleep(1.0)  # the last pods' own starts
            machine = _machine_cpu() - machine0
            mine = me.cpu_times()
            user, system = mine.user - mine0.user, mine.system - mine0.system
            helper_s = 0.0
            if helper_proc is not None and helper0 is not None:
                now = helper_proc.cpu_times()
                helper_s = now.user + now.system - helper0.user - helper0.system
            stop0, stop_cpu0 = time.monotonic(), sum(me.cpu_times()[:2])
        finally:
            runtime.shutdown(grace_seconds=0)
        stop_s, stop_cpu = time.monotonic() - stop0, sum(me.cpu_times()[:2]) - stop_cpu0
    per = 1000.0 / pods
    return (
        f"{'launcher' if launcher else 'a Python per pod'}: {pods / elapsed:.0f} pods/s; "
        f"CPU per pod: runtime {(user + system) * per:.2f} ms (user {user * per:.2f}, "
        f"system {system * per:.2f}), launcher {helper_s * per:.2f} ms; "
        f"whole machine {machine * per:.2f} ms; all stopped in {stop_s:.2f} s "
        f"(runtime CPU {stop_cpu * per:.2f} ms per pod)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=200)
    ap.add_argument("--dir", default=None, help="where the runtime's directory goes")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    print(f"pod starts: {args.pods} pods of sleep 60, runtime directory under "
          f"{args.dir or tempfile.gettempdir()}")  # fmt: skip
    print(f"  {python_speed()}")
    print(f"  {disk_speed(args.dir)}")
    for _ in range(args.repeat):
        for launcher in (True, False):
            print("  " + run(args.pods, args.dir, launcher))


if __name__ == "__main__":
    main()
