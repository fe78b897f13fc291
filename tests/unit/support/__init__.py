"""Tests of the shared test helpers themselves (the API server emulator)."""
