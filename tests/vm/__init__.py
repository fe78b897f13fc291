"""Real-kernel tests: QEMU guests with cgroup v2 (host side: test_*.py, harness.py; guest side: scenario_*.py)."""
