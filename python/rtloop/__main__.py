"""``python -m rtloop ...``: the same command as ``rtloop ...``.

The command line starts its child processes this way when the current executable is the
Python interpreter (the console script).
"""

from ._cli import main

if __name__ == "__main__":
    main()
