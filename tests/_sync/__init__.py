# GENERATED from tests/_async/__init__.py by tools/unasync.py: edit that file, not this one.
