"""Agent-level tests: ``podpin run`` end to end on fixture trees and the API server emulator."""
