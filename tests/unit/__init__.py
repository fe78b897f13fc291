"""Unit tests of pure code, one directory per package of ``agent/``."""
