"""tenure.testing: a pytest plugin for testing code that uses tenure (work in progress)."""
