"""Example project that serves advisors_app; nothing in the app imports it."""
