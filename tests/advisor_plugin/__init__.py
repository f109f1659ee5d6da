"""A test-only third-party app that registers its own advisor types from ``ready()``."""
