"""``python -m savegame``: the command line."""

from savegame.cli import main

if __name__ == "__main__":
    main()
