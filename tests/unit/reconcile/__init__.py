"""Unit tests of ``agent/reconcile`` (identity book, bundle naming, targets)."""
