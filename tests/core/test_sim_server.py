"""The simulator's server (tenure.testing.sim.Server): the real Lua scripts on Lua 5.1, key
expiry and TIME on the virtual clock, PUBLISH counting subscribers."""

from __future__ import annotations

import pytest

from tenure import scripts
from tenure.core.effects import Call, Command
from tenure.errors import BackendError
from tenure.testing import sim


def _server() -> tuple[sim.Sim, sim.Server]:
    world = sim.Sim(0, sim.Options(clients=1, workers=1, locks=1))
    return world, world.server


def test_expiry_and_time_follow_the_virtual_clock() -> None:
    world, server = _server()
    server.run(Command(("SET", "k", "v", "PX", "1500")))
    world.now = 1.499
    assert server.run(Command(("PTTL", "k"))) == 1
    assert server.run(Command(("TIME",))) == [b"1700000001", b"499000"]
    world.now = 1.5
    assert server.run(Command(("EXISTS", "k"))) == 0


def test_the_real_lock_scripts_run() -> None:
    world, server = _server()
    acquire, release = scripts.get("lock_acquire"), scripts.get("lock_release")
    grant = Call(acquire, ["lk"], [30000, "me:1"])
    assert server.run(grant) is None
    world.now = 1.0
    assert server.run(Call(acquire, ["lk"], [30000, "you:1"])) == 29000  # the holder's PTTL
    assert server.run(Call(release, ["lk", "ch"], ["0", 30000, "you:1"])) is None  # not owned
    assert server.run(Call(release, ["lk", "ch"], ["0", 30000, "me:1"])) == 1  # freed
    assert server.run(Command(("EXISTS", "lk"))) == 0


def test_a_script_error_is_a_backend_error() -> None:
    _, server = _server()
    server.run(Command(("SET", "lk", "a string")))
    acquire = scripts.get("lock_acquire")
    with pytest.raises(BackendError, match="TENURE_KIND"):  # a Lock script on a string key
        server.run(Call(acquire, ["lk"], [30000, "me:1"]))
