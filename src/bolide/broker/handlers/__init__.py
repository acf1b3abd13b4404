"""Request handlers of the broker, one module per family."""
