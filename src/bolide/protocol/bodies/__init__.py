"""JSON bodies, including fastjson's non-standard maps."""
