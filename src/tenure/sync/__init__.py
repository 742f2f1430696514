# GENERATED from src/tenure/aio/__init__.py by tools/unasync.py: edit that file, not this one.
"""The asyncio driver: the one authored source of both drivers (the sync one is generated)."""
