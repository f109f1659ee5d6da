"""A test-only site: the example site plus one plain sync view using the engine's sync API."""
