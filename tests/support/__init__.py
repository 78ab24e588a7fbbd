"""Shared test helpers, imported as `from support.<module> import ...` (tests/ is on the path)."""
