"""The server's data directory: private to its owner, and used by one server at a time.

The data directory holds the database (with token hashes), the usage database, the admin token and
the pods' logs and state, so it is made 0700 and every file in it 0600 at start, whatever an older
version or a umask left there (files the server creates later are created private by their
owners: the stores and the runtime). ``DataDirLock`` is an exclusive ``flock`` on
``DATA_DIR/server.lock``, held for the server's life: a second server on the same directory would
adopt and then kill the first one's pods, so it is refused with a message naming the holder. The
kernel drops the lock when the process dies, even by kill -9, so a crash never leaves it stale.
This module decides nothing else about the server (see ``gpuaas.server``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from pathlib import Path

LOCK_FILE = "server.lock"
# The admin token the server writes at start (``engine.tokens``); a starter reads it from here.
ADMIN_TOKEN_FILE = "admin-token"
DIR_MODE = 0o700
FILE_MODE = 0o600
_GROUP_OTHER = 0o077


class DataDirError(Exception):
    """The data directory cannot be used; the message says why and what to do."""


def make_private(data_dir: Path) -> None:
    """Create ``data_dir`` (0700) or tighten it: nothing under it readable by group or others.

    Only group and other bits are taken away (a pod's script keeps its owner's execute bit), so the
    server's own files end 0600 and its directories 0700. Symbolic links are never followed.
    """
    data_dir.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    try:
        os.chmod(data_dir, DIR_MODE)
        for root, dirs, files in os.walk(data_dir):
            for name in (*dirs, *files):
                _tighten(Path(root) / name)
    except OSError as exc:
        raise DataDirError(f"data dir {data_dir}: cannot make it private: {exc}") from exc


def _tighten(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):  # a pod's file may come and go meanwhile
        st = path.lstat()
        if (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)) and st.st_mode & _GROUP_OTHER:
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~_GROUP_OTHER)


class DataDirLock:
    """An exclusive lock on a data directory for one server process; ``release`` ends it."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> DataDirLock:
        """Take the lock or raise ``DataDirError`` naming the process that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise DataDirError(
                f"data dir {self.path.parent} is in use by another gpuaas server{holder}: two "
                "servers on one data dir would stop each other's pods. Stop the other server, or "
                "give this one its own --data-dir."
            ) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing drops the flock


def _read_holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).decode().strip())
        return f" (pid {pid})"
    return ""
