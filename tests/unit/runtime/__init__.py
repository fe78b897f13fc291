"""Unit tests of ``agent/runtime`` (container identity from the runtime's bundles)."""
