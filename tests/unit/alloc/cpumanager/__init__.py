"""Unit tests of ``agent.alloc.cpumanager``."""
