"""podpin's tests: unit tests mirroring agent/, agent-level tests, deploy tests, real-kernel VM tests (see README.md)."""
