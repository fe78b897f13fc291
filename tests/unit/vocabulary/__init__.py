"""Unit tests of ``agent.vocabulary``: the words every layer shares."""
