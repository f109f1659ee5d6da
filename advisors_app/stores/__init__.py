"""Django-backed implementations of the core storage contracts (chat memory, ...)."""
