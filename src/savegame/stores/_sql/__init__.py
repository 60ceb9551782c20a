"""What the two SQL stores (SQLite, PostgreSQL) share, written once.

* :mod:`~savegame.stores._sql.rows`: the column lists and the row decoders;
* :mod:`~savegame.stores._sql.statements`: the statements both run, built from a
  :class:`~savegame.stores._sql.statements.Dialect` (the two dialects side by side);
* :mod:`~savegame.stores._sql.store`: :class:`~savegame.stores._sql.store.SqlStore`,
  the Store methods whose body is the same on both.
"""
