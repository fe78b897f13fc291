"""Renderings of plans for people (text, with a CPU map) and machines (JSON)."""
