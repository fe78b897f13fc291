"""Unit tests of ``agent.topology``."""
