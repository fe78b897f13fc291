"""Tests of the renderings for people and programs (``agent.render``)."""
