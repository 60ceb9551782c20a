"""Adapters that plug savegame into other frameworks (optional extras, imported lazily)."""
