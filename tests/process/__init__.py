"""Sync-only tests: several processes, faults (SIGSTOP/SIGKILL of servers and processes),
fork, the demo, replication, and the few tests about asyncio tasks or threads as such."""
