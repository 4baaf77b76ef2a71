"""Reading pods' captured stdout and stderr, once or following as ``kubectl logs -f`` does.

This module owns turning log files into lines: one pod's lines as written, several pods' lines
prefixed with ``[pod]``. It writes nothing and knows no processes; whether pods are still alive
(so following should wait for more) is a callable the runtime passes in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

FOLLOW_INTERVAL = 0.1


def read_logs(paths: dict[str, Path]) -> Iterator[str]:
    prefix = len(paths) > 1
    for name, path in paths.items():
        try:
            text = path.read_text(errors="replace")
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            yield f"[{name}] {line}" if prefix else line


def follow_logs(paths: dict[str, Path], alive: Callable[[], bool]) -> Iterator[str]:
    """Lines as they arrive, until the pods are gone and everything written has been read.

    Pods are checked twice in a row before stopping, so a pod being retried (a moment with no
    live process) does not end the stream.
    """
    prefix = len(paths) > 1
    offsets = dict.fromkeys(paths, 0)
    partial = dict.fromkeys(paths, b"")
    quiet_checks = 0
    while True:
        got = False
        for name, path in paths.items():
            try:
                with path.open("rb") as fh:
                    fh.seek(offsets[name])
                    chunk = fh.read()
            except FileNotFoundError:
                continue
            if len(chunk) == 0 and path.stat().st_size < offsets[name]:
                offsets[name] = 0  # truncated by a new start of the workload
                continue
            offsets[name] += len(chunk)
            lines = (partial[name] + chunk).split(b"\n")
            partial[name] = lines.pop()
            for raw in lines:
                got = True
                line = raw.decode(errors="replace")
                yield f"[{name}] {line}" if prefix else line
        if got:
            quiet_checks = 0
            continue
        quiet_checks = 0 if alive() else quiet_checks + 1
        if quiet_checks >= 2:
            break
        time.sleep(FOLLOW_INTERVAL)
    for name, rest in partial.items():
        if rest:
            line = rest.decode(errors="replace")
            yield f"[{name}] {line}" if prefix else line
