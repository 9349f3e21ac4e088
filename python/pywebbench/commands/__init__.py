"""One module per ``pywebbench`` subcommand; each defines a click command named ``command``."""
