"""One typed dataclass per request and response header."""
