"""The SASS of a compiled kernel, read with the cuobjdump that Triton's wheel bundles (no GPU
needed: the cubin comes from compiling for sm_90 on the CPU)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path


def disassemble(cubin: bytes) -> str:
    """``cuobjdump -sass`` of ``cubin``."""
    from triton import knobs

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        return subprocess.run(
            [knobs.nvidia.cuobjdump.path, "-sass", str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
