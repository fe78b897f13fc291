"""Shared test helpers: builders, emulators and factories used by several test directories."""
