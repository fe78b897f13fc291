"""Shared test helpers: emulators, builders, factories (import as ``tests.support.x``)."""
