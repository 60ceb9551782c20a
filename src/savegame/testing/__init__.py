"""Test support shipped with savegame: the store contract suite, record builders, and
``assert_replays`` (recorded runs as tests of the code that runs them).

``savegame.testing.contract`` needs pytest; import it only from test code.
"""

from savegame.testing._replay import assert_replays

__all__ = ["assert_replays"]
