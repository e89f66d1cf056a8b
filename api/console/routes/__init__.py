"""Console routes, one module per page family."""
