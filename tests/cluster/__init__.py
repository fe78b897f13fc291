"""Tests and tools that run on a Kubernetes cluster (the differential harness, its scenarios)."""
