"""Framework-agnostic advisor engine (no Django imports below this package)."""
