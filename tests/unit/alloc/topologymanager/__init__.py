"""Unit tests of ``agent.alloc.topologymanager``."""
