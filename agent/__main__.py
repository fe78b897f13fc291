"""``python -m agent`` runs the ``podpin`` command."""

from agent.cli import main

raise SystemExit(main())
