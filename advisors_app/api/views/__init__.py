"""The API's views, one module per area."""
