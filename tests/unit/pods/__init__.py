"""Unit tests of ``agent.pods``."""
