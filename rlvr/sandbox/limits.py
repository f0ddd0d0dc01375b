"""Resource limits for one sandboxed run, and the rlimits they become inside the sandbox."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What one run may use. Output caps apply to stdout and stderr each; `scratch_bytes` sizes the
    in-memory working directory (and /tmp; /dev/shm too under unshare) under bubblewrap and unshare."""

    cpu_s: float = 4.0
    wall_s: float = 6.0
    memory_bytes: int = 1 << 30  # address space
    file_size_bytes: int = 16 << 20
    open_files: int = 64
    processes: int = 32
    output_bytes: int = 1 << 20
    scratch_bytes: int = 64 << 20

    def rlimits(self) -> list[tuple[str, int, int]]:
        """(resource name, soft, hard) for resource.setrlimit; CPU gets SIGXCPU at the soft limit, SIGKILL 1 s later."""
        cpu = max(1, math.ceil(self.cpu_s))
        return [
            ("RLIMIT_CPU", cpu, cpu + 1),
            ("RLIMIT_AS", self.memory_bytes, self.memory_bytes),
            ("RLIMIT_FSIZE", self.file_size_bytes, self.file_size_bytes),
            ("RLIMIT_NOFILE", self.open_files, self.open_files),
            ("RLIMIT_NPROC", self.processes, self.processes),
            ("RLIMIT_CORE", 0, 0),
        ]
