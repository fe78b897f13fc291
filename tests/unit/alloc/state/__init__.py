"""Unit tests of ``agent.alloc.state``."""
