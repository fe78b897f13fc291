"""Unit tests of pure and small modules, laid out like ``agent/``."""
