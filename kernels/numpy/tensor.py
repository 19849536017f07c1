"""numpy kernels (being written)."""
