"""Agent-level tests: the whole agent against fixture trees and the API server emulator."""
