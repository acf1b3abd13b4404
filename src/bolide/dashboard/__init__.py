"""A small web dashboard over the admin client."""
