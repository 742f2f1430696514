"""The Lua scripts, one file per operation. Each runs atomically on the server.

Scripts are sent with EVALSHA; a server that does not know one yet answers NOSCRIPT and gets the
source once with EVAL (which also caches it), so each script crosses the wire once per server.

Every key a script touches arrives in ``KEYS``, named by `tenure.keys`; scripts never
build key names. Channels are not keys: a script may build a channel name (FairLock's
per-waiter channels) from an argument.

Shared fragments: a file whose name starts with ``_`` is not a script but a block of Lua that
scripts share. A line ``-- @include NAME`` (alone on its line) in a script is replaced, when
the script is loaded, by the text of ``_NAME.lua``. Fragments cannot include fragments. The
SHA1 is that of the spliced source, which is what the server runs.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

INCLUDE = re.compile(r"^[ \t]*-- @include ([A-Za-z0-9_]+)[ \t]*$", re.MULTILINE)
"""A line splicing in fragment ``_<name>.lua``."""


@dataclass(frozen=True)
class Script:
    """A Lua script and its SHA1, as EVALSHA needs it."""

    name: str
    source: str
    sha: str


def _read(filename: str) -> str:
    return resources.files(__name__).joinpath(filename).read_text("utf-8")


def fragment(name: str) -> str:
    """The text of fragment ``_<name>.lua``."""
    text = _read(f"_{name}.lua")
    if INCLUDE.search(text):
        raise ValueError(f"fragment _{name}.lua includes another fragment; fragments cannot nest")
    return text


def splice(source: str) -> str:
    """``source`` with each ``-- @include NAME`` line replaced by fragment ``NAME``."""
    return INCLUDE.sub(lambda match: fragment(match.group(1)).rstrip("\n"), source)


@cache
def get(name: str) -> Script:
    """The script ``<name>.lua`` from this package, its fragments spliced in."""
    if name.startswith("_"):
        raise ValueError(f"{name!r} is a fragment, not a script")
    source = splice(_read(f"{name}.lua"))
    return Script(name, source, hashlib.sha1(source.encode()).hexdigest())


def _lua_files() -> list[str]:
    return sorted(
        entry.name for entry in resources.files(__name__).iterdir() if entry.name.endswith(".lua")
    )


def names() -> list[str]:
    """Every script of the package (fragments excluded), by name."""
    return [f[: -len(".lua")] for f in _lua_files() if not f.startswith("_")]


def fragments() -> list[str]:
    """Every fragment of the package, by the name ``-- @include`` uses."""
    return [f[1 : -len(".lua")] for f in _lua_files() if f.startswith("_")]


@cache
def guarded(script: Script) -> Script:
    """``script`` (a release script) behind the reconcile guard (``_reconcile_guard.lua``):
    it runs only while the owner holds more on the server than its client recorded. Callers
    append two ARGV: the owner's hash field and the recorded count."""
    source = fragment("reconcile_guard") + script.source
    return Script(f"{script.name}+guard", source, hashlib.sha1(source.encode()).hexdigest())

PUBLISH = re.compile(r"redis\.(p?call)\('publish',")
NUMSUB = re.compile(r"\('pubsub', 'numsub',")


@cache
def sharded(script: Script) -> Script:
    """``script`` publishing with SPUBLISH instead of PUBLISH (a Redis >= 7 cluster: the
    message goes to the shard owning the channel's slot, where its waiters SSUBSCRIBE), and
    counting listeners with ``PUBSUB SHARDNUMSUB`` instead of ``NUMSUB``.

    One ``.lua`` per operation stays the source; this variant is derived from it at load.
    Only the lower-case ``redis.call('publish',`` (or ``redis.pcall``) is rewritten: a script
    that must publish cluster-wide (a channel outside its keys' slot) writes
    ``redis.call('PUBLISH',``.
    """
    source = PUBLISH.sub(r"redis.\1('spublish',", script.source)
    source = NUMSUB.sub("('pubsub', 'shardnumsub',", source)  # who listens on that shard
    if source == script.source:
        return script
    return Script(script.name, source, hashlib.sha1(source.encode()).hexdigest())
