"""PySpark data source for Bolide topics."""
