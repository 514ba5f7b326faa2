"""The Spark runtime: the only package that imports pyspark."""
