"""Small functions and classes the examples, the demo and the tests use as UDFs and user code."""
