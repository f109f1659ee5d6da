"""Chat and embedding model implementations."""
