"""Unit tests of ``agent.alloc``."""
