"""``python -m rtloop ...``: the same command as ``rtloop ...`` (the package's ``rtloop``
executable, run in this process's place).

Child processes started from Python (the runtime, the recorder, the benchmarks) run this way.
"""

from ._cli import main

if __name__ == "__main__":
    main()
