"""`auditrl audit` that SIGKILLs itself in the middle of writing a transcript, for the tests to rerun.

    python kill_mid_write_child.py LINE AUDIT-ARGS...

The process writes the first LINE - 1 transcripts of its transcripts file whole; of line LINE it writes
the first half, then kills itself with SIGKILL (no handler, no flush, no cleanup runs), as a crash, an
OOM kill or a power cut would leave the file.
"""

from __future__ import annotations

import os
import signal
import sys

from auditrl.cli import app
from auditrl.scaffold.store import TRANSCRIPTS

_write = os.write
lines = 0


def write(fd: int, data: bytes | memoryview) -> int:
    global lines
    if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == TRANSCRIPTS and bytes(data).endswith(b"\n"):
        lines += 1
        if lines == int(sys.argv[1]):
            _write(fd, bytes(data)[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
    return _write(fd, data)


if __name__ == "__main__":
    os.write = write  # type: ignore[assignment]
    app(sys.argv[2:])
