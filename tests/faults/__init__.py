"""Fault-injection tests (scenarios in the repository's faults/ package)."""
