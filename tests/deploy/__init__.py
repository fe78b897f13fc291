"""Deployment tests: manifests, chart values, the container image."""
