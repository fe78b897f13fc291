"""Unit tests of ``agent.sim`` and ``podpin simulate``."""
