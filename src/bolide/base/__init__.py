"""Foundation shared by every layer: limits, errors, clocks, services, file I/O. Stdlib only."""
