"""Unit tests of ``agent.alloc.memorymanager``."""
