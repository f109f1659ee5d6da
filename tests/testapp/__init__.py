"""A test-only app with models that exercise the database (installed by tests.settings only)."""
