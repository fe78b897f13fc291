"""Shared test helpers: API server emulator, fixture tree builders, pod factories, machines, strategies, vectors."""
