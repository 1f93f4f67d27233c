"""Test suite (a package, so shared test modules import by relative name)."""
