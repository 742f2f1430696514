"""Sans-I/O core: the algorithms, written once for the sync and asyncio drivers.

Operations are generators ("flows") that yield effects (`tenure.core.effects`) and receive
their results; a driver performs the effects with blocking calls or with ``await``.
"""
