"""The Lua scripts, one file per operation. Each runs atomically on the server.

Scripts are sent with EVALSHA; a server that does not know one yet answers NOSCRIPT and gets the
source once with EVAL (which also caches it), so each script crosses the wire once per server.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class Script:
    """A Lua script and its SHA1, as EVALSHA needs it."""

    name: str
    source: str
    sha: str


@cache
def get(name: str) -> Script:
    """The script ``<name>.lua`` from this package."""
    source = resources.files(__name__).joinpath(f"{name}.lua").read_text("utf-8")
    return Script(name, source, hashlib.sha1(source.encode()).hexdigest())
