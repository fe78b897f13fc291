"""podpin's tests: unit tests mirroring agent/, agent-level, deploy and real-kernel VM tests (see README.md)."""
