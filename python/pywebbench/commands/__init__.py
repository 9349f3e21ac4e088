"""One module per ``pywebbench`` subcommand; each defines a click command named ``command``.

Modules whose name starts with ``_`` are helpers of the commands, never listed as commands
(``_common``, ``_load_summary``, ``_load_agents``)."""
