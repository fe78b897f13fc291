"""Sub-commands of ``podpin``; each module here registers one parser.

A command is a module ``agent/commands/<name>.py`` exposing
``register(subparsers)``, which adds its parser and sets ``func`` (parsed
arguments -> exit status). :mod:`agent.cli` discovers the modules in name
order, so adding a command never touches another command's file. Nothing is
re-exported: commands are found, not imported by name, and each imports its
heavy packages only when it runs, which keeps ``podpin --help`` quick.
"""

__all__: list[str] = []
