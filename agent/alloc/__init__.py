"""The allocation core: take-by-topology, hint merging, CPU and memory policies, the planner.

Nothing in this package does I/O or reads the clock.
"""
