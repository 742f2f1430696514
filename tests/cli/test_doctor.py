"""``tenure doctor``: passes on a good server, flags an evicting policy, persistence off with
fencing tokens, and users whose ACL forbids what tenure sends. Each test starts its own
server (it changes the configuration)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

import tenure
from support.servers import Server, binaries

from .runner import tenure_cmd

KINDS = [(kind, binary) for kind, binary in binaries() if binary is not None]


@pytest.fixture(params=[kind for kind, _ in KINDS])
def own_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    srv = Server(dict(KINDS)[request.param]).start()
    yield srv
    srv.stop()


def doctor(url: str) -> tuple[int, dict[str, dict[str, str]]]:
    done = tenure_cmd("doctor", "--json", url=url)
    assert "Traceback" not in done.stderr, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] == (done.returncode == 0)
    return done.returncode, {c["name"]: c for c in data["checks"]}


def test_passes_on_a_good_server(own_server):
    code, checks = doctor(own_server.url)
    assert code == 0, checks
    for name in ("version", "maxmemory-policy", "persistence", "latency", "clock", "acl"):
        assert checks[name]["verdict"] == "pass", checks[name]
    table = tenure_cmd("doctor", url=own_server.url)
    assert table.returncode == 0
    assert "OK" in table.stdout


def test_flags_an_evicting_policy(own_server):
    with own_server.client() as raw:
        raw.config_set("maxmemory-policy", "allkeys-lru")
    code, checks = doctor(own_server.url)
    assert code == 1
    check = checks["maxmemory-policy"]
    assert check["verdict"] == "fail"
    assert "allkeys-lru" in check["detail"]
    assert "noeviction" in check["fix"]


def test_flags_persistence_off_once_fencing_tokens_exist(own_server):
    with own_server.client() as raw:
        raw.set("redisson_lock_token:{ledger}", 7)
    code, checks = doctor(own_server.url)
    assert code == 1
    assert checks["persistence"]["verdict"] == "fail"
    assert "appendonly yes" in checks["persistence"]["fix"]
    with own_server.client() as raw:
        raw.config_set("appendonly", "yes")
    assert doctor(own_server.url)[1]["persistence"]["verdict"] == "pass"


def test_flags_persistence_off_once_election_terms_exist(own_server):
    """An election's terms are fencing tokens too (docs/wire.md): its term counter alone
    makes a server without persistence a failure."""
    with own_server.client() as raw:
        raw.config_set("appendonly", "no")
        raw.config_set("save", "")
    assert doctor(own_server.url)[1]["persistence"]["verdict"] == "pass"
    with tenure.Client(own_server.url) as c:
        election = c.election("sched")
        assert election.campaign("a") == 1
        election.resign()
    code, checks = doctor(own_server.url)
    assert code == 1
    assert checks["persistence"]["verdict"] == "fail", checks["persistence"]
    assert "election terms" in checks["persistence"]["detail"]


def test_flags_a_user_who_may_not_run_scripts(own_server):
    """A user with ACL rights (checked with ACL DRYRUN) but without EVALSHA."""
    with own_server.client() as raw:
        raw.execute_command(
            "ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all", "-evalsha"
        )
    url = own_server.url.replace("redis://", "redis://noscripts:pw@")
    code, checks = doctor(url)
    assert code == 1
    acl = checks["acl"]
    assert acl["verdict"] == "fail"
    assert "EVALSHA" in acl["detail"]
    assert "DRYRUN" in acl["detail"]
    assert "+evalsha" in acl["fix"]


def test_flags_a_restricted_user_without_admin_rights(own_server):
    """No ACL DRYRUN for this user: each command is queued in a discarded MULTI instead.
    HINCRBY (run by the acquire scripts) is forbidden; nothing is written by the check."""
    with own_server.client() as raw:
        raw.execute_command(
            "ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-@admin", "-hincrby"
        )
    url = own_server.url.replace("redis://", "redis://app:pw@")
    code, checks = doctor(url)
    assert code == 1
    acl = checks["acl"]
    assert acl["verdict"] == "fail"
    assert "HINCRBY" in acl["detail"]
    assert "MULTI" in acl["detail"]
    with own_server.client() as raw:
        assert raw.dbsize() == 0


def test_a_user_allowed_everything_passes_via_the_probe(own_server):
    with own_server.client() as raw:
        raw.execute_command("ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-@admin")
    url = own_server.url.replace("redis://", "redis://app:pw@")
    code, checks = doctor(url)
    assert checks["acl"]["verdict"] == "pass", checks["acl"]
    assert code == 0, checks


def test_an_embedded_demo_server_without_persistence_is_a_warning():
    """tenure's own embedded server runs without persistence on purpose: with fencing tokens
    on it, doctor warns (exit 0) instead of failing, and says what real work needs."""
    from tenure.embedded import embedded_server

    with embedded_server() as url:
        with redis.Redis.from_url(url) as raw:
            raw.set("redisson_lock_token:{ledger}", 7)
        code, checks = doctor(url)
    assert code == 0, checks
    check = checks["persistence"]
    assert check["verdict"] == "warn"
    assert "embedded demo/test server" in check["detail"]
    assert "appendonly yes" in check["fix"]


def test_every_command_tenure_sends_has_a_sample_acl_dryrun_accepts(own_server):
    """The ACL check asks ACL DRYRUN about each command with sample arguments; a command a
    new script runs without a sample of the right arity sends doctor to its MULTI fallback."""
    from tenure import keys
    from tenure.cli import doctor as checks

    commands = sorted({*checks.CLIENT_COMMANDS, *checks.script_commands()})
    refused = {}
    with own_server.client() as raw:
        for command in commands:
            sample = checks.sample(command, "k", keys.lock_channel("k"))
            try:
                raw.execute_command("ACL", "DRYRUN", "default", *sample)
            except redis.ResponseError as error:
                refused[command] = str(error)
    assert not refused, refused
