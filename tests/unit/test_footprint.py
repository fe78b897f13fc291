"""``podpin run`` caps glibc's malloc arenas and fixes its thresholds before its threads start, and trims the heap after
each full pass (``agent/footprint.py``)."""

from __future__ import annotations

import subprocess
import sys

from agent.footprint import ARENAS, THRESHOLD, cap_malloc_arenas, tune_malloc


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


def test_glibc_accepts_the_thresholds() -> None:
    """On glibc the arena cap and the fixed mmap and trim thresholds are all accepted; the thresholds are 128 KiB."""
    assert (True, 128 * 1024) == (tune_malloc(), THRESHOLD)


def test_trim_gives_freed_heap_back() -> None:
    """80 MiB of 2 KiB blocks freed below a block still in use stay resident (free() trims only the heap's top);
    ``trim_heap`` gives them back."""
    probe = (
        "import os\nfrom agent.footprint import trim_heap, tune_malloc\nassert tune_malloc()\n"
        "def rss():\n    return int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE') >> 20\n"
        "blocks = [bytearray(2048) for _ in range(40_000)]\nkeep = bytearray(2048)\ndel blocks\n"
        "freed = rss()\ntrimmed = trim_heap()\nprint(freed - rss(), trimmed)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    given_back, trimmed = done.stdout.split()
    assert (True, "True") == (int(given_back) >= 60, trimmed)
