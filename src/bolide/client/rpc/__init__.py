"""One coroutine per request code."""
