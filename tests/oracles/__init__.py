"""Test oracles: literal, slow transcriptions of kubelet behaviour that the fast code is checked against.

They live with the tests, not in the agent package, so they never ship in the wheel.
"""
