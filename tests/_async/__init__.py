# The asyncio behaviour tests, written once; tools/unasync.py generates tests/_sync from them.
