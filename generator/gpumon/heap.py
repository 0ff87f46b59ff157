"""Large buffers go back to the system when freed (glibc's malloc; elsewhere nothing changes).

glibc serves an allocation above its mmap threshold (128 KiB at start) with a mapping of its own,
returned to the system when freed, but raises the threshold to the size of each such buffer freed
(up to 32 MiB on 64-bit systems, ``mallopt(3)``, "M_MMAP_THRESHOLD"): after the first large
answer body of a ``gpumon validate`` run is freed, the later ones come from the heap, whose freed
pieces stay in the process' memory between the small objects kept around them. Setting the
threshold once turns that adjustment off. Measured on a 64,000-GPU stand-in fleet
(``bench/validate_memory.py``): peak RSS 132 MiB without, 106 MiB with it.
"""

from __future__ import annotations

import ctypes

#: ``mallopt`` parameter number of M_MMAP_THRESHOLD (glibc's malloc.h)
M_MMAP_THRESHOLD = -3
#: glibc's default starting threshold, kept fixed
THRESHOLD = 128 * 1024


def return_large_buffers(threshold: int = THRESHOLD) -> bool:
    """Fix the mmap threshold at ``threshold`` bytes; True when the C library took it (glibc),
    False where it has no ``mallopt`` or refused (musl, macOS: nothing changes there)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, threshold) == 1
