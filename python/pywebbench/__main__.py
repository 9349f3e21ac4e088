"""``python -m pywebbench``: the same command line as ``pywebbench``."""

from pywebbench.cli import main

if __name__ == "__main__":
    main()
