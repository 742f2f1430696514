"""Tests of the sans-I/O core (``tenure.core``): flows driven by scripted replies, no server."""
