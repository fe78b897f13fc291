"""Unit tests of ``agent.kube`` against the API server emulator and manifest directories."""
