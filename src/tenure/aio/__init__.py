# Source of tenure.sync: tools/unasync.py generates src/tenure/sync from this folder.
"""The asyncio driver: the one authored source of both drivers (the sync one is generated)."""
