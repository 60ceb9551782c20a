"""Test support shipped with savegame: the store contract suite and record builders.

``savegame.testing.contract`` needs pytest; import it only from test code.
"""
