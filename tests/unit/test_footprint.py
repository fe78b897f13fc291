"""``podpin run`` caps glibc's malloc arenas before its threads start (``agent/footprint.py``)."""

from __future__ import annotations

import subprocess
import sys

from agent.footprint import ARENAS, cap_malloc_arenas


def test_glibc_accepts_the_arena_cap() -> None:
    """On glibc (Debian, the image) mallopt(M_ARENA_MAX) is accepted; the cap is small."""
    assert (True, 2) == (cap_malloc_arenas(), ARENAS)


def test_threads_allocating_after_the_cap_still_work() -> None:
    """A process that capped its arenas runs threads that allocate and free as before."""
    probe = (
        "import threading\nfrom agent.footprint import cap_malloc_arenas\nassert cap_malloc_arenas()\n"
        "def work():\n    [bytearray(4096) for _ in range(2000)]\n"
        "threads = [threading.Thread(target=work) for _ in range(8)]\n"
        "[t.start() for t in threads]\n[t.join() for t in threads]\nprint('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "ok" == done.stdout.strip()
