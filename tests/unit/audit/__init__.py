"""Tests of agent/audit: the affinity audit, the interference metrics and their psutil probe."""
