"""Shared test helpers: emulators, builders and factories (import as ``tests.support.<module>``)."""
