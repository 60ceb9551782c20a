"""What the two SQL stores (SQLite, PostgreSQL) share: one column order and one row decoding."""
