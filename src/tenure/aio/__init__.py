"""The asyncio driver: runs the core's flows with ``redis.asyncio`` and tasks."""
