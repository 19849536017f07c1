"""Layer functions (being written)."""

__all__: list[str] = []
