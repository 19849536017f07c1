"""Op schemas (being written)."""
