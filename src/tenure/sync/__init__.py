"""The blocking driver: runs the core's flows with redis-py's sync client and threads."""
