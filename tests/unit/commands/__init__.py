"""Tests of the ``podpin`` sub-commands (``agent.commands``)."""
