"""Unit tests of ``agent.cgroups`` on fixture trees."""
