# GENERATED from src/tenure/aio/backend.py by tools/unasync.py: edit that file, not this one.
"""Commands on the client's redis-py pools, once each: no hidden retries.

redis-py retries a failed command on the same connection object by default, which multiplies
the time a dead server takes to report and can send a lock script twice. tenure sends each
command once and lets the algorithm decide what a failure means. A command that failed or
was cancelled mid-way disconnects its socket, so a late reply is never read by the next user.

In a cluster each command goes to the node owning its first key's slot (every key of one
script shares a slot, docs/wire.md). A MOVED or ASK reply means the command did not run, so it
is sent again where the cluster says (MOVED also updates the slot map; TRYAGAIN, a script
whose keys are split by a migration in progress, is resent shortly). After a connection
failure the slot map is refreshed before the next command (a replica may have been
promoted).

A failover is absorbed within the caller's wait (docs/operations.md, "Failover"): a script
that surely did not reach a server, because no connection could be made for it, is sent
again up to its ``Call.until`` (a call without one, such as a release, for the client's
socket timeout: `Route.resend_window`), in a cluster (after the slot map is refreshed) or under
Sentinel (redis-py asks Sentinel for the master on each connect). A command that failed
after it was written may have run: it is never sent again here; the flow reconciles it.
On one plain server nothing can move, so a refused connection raises at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any

from tenure._concurrency import Spawner, sleep
from tenure._redis import (
    LENDING,
    PLACE,
    AskError,
    MovedError,
    NoScriptError,
    NotReady,
    RedisError,
    ResponseError,
    TryAgainError,
    Unsent,
    give_back,
    idle,
    read_kept,
    read_reply,
    send_command,
    send_kept,
    torn,
    check_one_slot,
    unsent,
)
from tenure._settle import settle_read_bound
from tenure.sync.route import Route
from tenure.core.context import Context
from tenure.core.effects import CLEAN_UP_TRIES, NOT_RUN, SENDING, Call, Command
from tenure.core.options import check_replicas, replica_wait
from tenure.errors import ClientClosedError
from tenure.scripts import sharded

_UNREAD = object()
"""In `Backend._handed`: the script of a call with ``settle`` is (being) sent, its reply
not read yet."""

REDIRECTS = 20
"""MOVED/ASK/TRYAGAIN replies followed for one command before giving up."""
SPARE = 2
"""Connections a backend keeps out of its pool between commands (see ``spare``)."""
TRY_AGAIN = 0.05
"""Seconds before resending after TRYAGAIN (a multi-key script while its slot migrates)."""
RESEND_PAUSE = (0.05, 0.5)
"""First and longest pause (seconds) before sending again a script that surely did not
reach a server (no connection), while a failover may be under way."""

log = logging.getLogger("tenure")


@dataclass(frozen=True, slots=True)
class Sent:
    """A script sent by `Backend.send()`: its connection stays out of the pool
    until `Backend.receive()` has its reply (or `Backend.abandon()` gives it up).

    ``held`` is the connection's slot (`Backend._connection()`): ``receive`` takes it
    out as it gives the connection back or up; still there, the connection is the
    holder's of this ``Sent``."""

    pool: Any
    held: list[Any]
    call: Call | Command


def _handshakes_anew(pool: Any) -> None:
    """An interrupt (a signal handler's exception, a cancellation) came inside redis-py's
    connect, as the pool made a connection: the pool took it back as it was, its handshake
    perhaps half done (a ``CLIENT SETINFO`` sent and its reply unread: the next command
    would read that reply as its own, and every reply after it one behind; or SELECT never
    sent). Which connection it was is not known: the pool's idle connections are dropped
    (each connects anew when next lent); those in use are whole (their handshakes ended)."""
    try:
        pool.disconnect(inuse_connections=False)
    except TypeError:  # redis-py 5's sync BlockingConnectionPool takes no argument there
        for conn in list(getattr(getattr(pool, "pool", None), "queue", ())):
            if conn is not None:  # its idle connections (None: a place never filled)
                conn.disconnect()


class Backend:
    """Sends commands and scripts over the connection pool that serves their keys."""

    def __init__(self, route: Route, ctx: Context, park: bool = False) -> None:
        self.route = route
        self.ctx = ctx
        self._park = park
        self.spare: list[Any] = []
        """Up to `SPARE` connections kept out of the pool between commands (with
        ``park``, a pool tenure owns, one server): taking one back costs a list pop, where
        redis-py's blocking pool costs about 13 us a command (its condition, queue and
        observability hooks). Never one whose reply was not read to its end."""
        self._spares = threading.Lock()
        """Guards `spare` while a connection moves from it to a caller's slot."""
        self.suspect = True
        """True until a command succeeded, and again after a connection failed or a reply
        did not come, until one succeeds: a fan-out leaves such a server to the background
        rather than wait inline for a connection that may hang (`send()`)."""
        self.settle: Callable[[Generator[Any, Any, None]], None] | None = None
        """Runs the flow a `Call.settle` returns (the runner sets it; None: no settling)."""
        self._settling = Spawner("tenure-settle")
        self.closed = False
        """Set by `close()`, before the client closes its pool. That closes the sockets of
        the calls still in flight under their reads, which redis-py reports as whatever it
        met (its parser's buffer closed: ValueError, "I/O operation on closed file"), a bug
        to the flow; such a call fails with ClientClosedError instead, which stops the
        flows as a call made after close() does."""
        self._handed: dict[int, Any] = {}
        """id(connection) -> the reply (`_UNREAD`: none yet; `NOT_RUN`: not sent) of a call
        with ``settle`` while it is in flight: a caller that stops waiting meanwhile leaves
        the connection to `_settle_later()` instead of dropping it with its reply."""

    def _failed(self) -> None:
        self.suspect = True
        self.route.failed()

    def execute(self, *args: Any) -> Any:
        """One command; its reply. Raises redis-py errors unchanged."""
        key = str(args[1]) if len(args) > 1 else None
        try:
            return self._routed(key, self._command, args)
        except Unsent as failure:
            error = failure.error
        raise error  # outside the handler: redis-py's error as it was raised

    def settle_count(self, channel: str, unsure: int, rounds: int) -> int | None:
        """`tenure.core.effects.Settle`: the last ``PUBSUB NUMSUB`` count of ``channel``,
        None in a cluster (its sharded count is right). Raises redis-py errors unchanged."""
        if self.route.cluster:
            return None
        _, connect, _ = self.route.listener_target(channel, False)
        conn = connect()  # RESP2: the confirmations are the transaction's replies
        try:
            conn.connect()
            send_command(conn, "PUBSUB", "NUMSUB", channel)
            count = int((conn.read_response())[1])
            for _ in range(rounds):
                if count < unsure:
                    break
                conn.send_packed_command(
                    conn.pack_commands(
                        [
                            ("MULTI",),
                            ("SUBSCRIBE", channel),
                            ("UNSUBSCRIBE", channel),
                            ("PUBSUB", "NUMSUB", channel),
                            ("EXEC",),
                        ]
                    )
                )
                replies = [conn.read_response() for _ in range(5)]
                count = int(replies[-1][-1][1])
            return count
        finally:
            conn.disconnect()

    def call(self, call: Call) -> Any:
        """One script (EVALSHA, EVAL on NOSCRIPT); then WAIT for replicas if configured.

        Raises ValueError, before any I/O, in a cluster when the keys span slots (a name
        with a ``{`` but no non-empty ``{tag}``: its Redisson-layout keys hash apart).
        """
        route = self.route
        if route.cluster and call.keys:
            check_one_slot(call.script.name, call.keys)
        pause = RESEND_PAUSE[0]
        until = call.until
        while True:
            try:
                if route.cluster or not route.ready:
                    key = call.keys[0] if call.keys else None
                    reply, acknowledged = self._routed(key, self._script, call)
                else:  # one server: nothing to route, no redirection to follow
                    pool = route.client.connection_pool
                    reply, acknowledged = self._on(pool, self._script, call, False)
                break
            except Unsent as failure:
                error = failure.error
            # Not sent: send again once the topology may have moved (the slot map is
            # refreshed first, see ``_failed``), while the caller still waits.
            if not route.follows_failover:
                raise error  # redis-py's error as it was raised
            if until is None:
                until = time.monotonic() + route.resend_window
            left = until - time.monotonic()
            if left <= 0:
                raise error  # redis-py's error as it was raised
            if pause == RESEND_PAUSE[0]:
                log.info(
                    "script %s: no connection (%s); sent again within the caller's wait",
                    call.script.name, error,
                )
            sleep(min(pause, left))
            pause = min(2 * pause, RESEND_PAUSE[1])
        if acknowledged is not None:
            check_replicas(self.ctx, call, reply, acknowledged)
        return reply

    def send(self, call: Call | Command) -> Sent | None:
        """Send ``call``'s script without reading its reply, so that scripts for several
        servers can be on their way at once (RedLock, MultiLock); `receive()` reads it.

        None when ``call`` must go through `call()` instead (in a cluster, which routes
        and follows redirections per command, or with ``wait_for_replicas``).

        Raises ClientClosedError once the client is closed (a MultiLock/RedLock round
        sends here without its member's runner, which refuses a closed client itself):
        redis-py's pool would connect again, and the connection outlive the client."""
        if self.closed:
            raise ClientClosedError("the client is closed")
        try:
            pool = self.route.pool_for(None)  # the first use asks the server (INFO)
        except BaseException:
            self.suspect = True
            raise
        if self.route.cluster or self.ctx.wait_for_replicas:
            return None
        held: list[Any] = [None]  # the connection while it is this call's (`_connection`)
        try:
            conn = self._connection(pool, held)
            if isinstance(call, Command):
                send_command(conn, *call.args)
            else:
                script, keys = call.script, call.keys
                send_command(
                    conn, "EVALSHA", script.sha, len(keys), *keys, *call.args
                )
            sent = Sent(pool, held, call)  # the caller's once returned (no call until then)
        except BaseException as error:  # part of it may be on its way: never reuse it
            # As in `_on()`: dropped inline, given back once in the background (`_give_up`),
            # the clean-up run again from the top when a second interrupt lands in it.
            conn = held[0]
            tries, claim, late = 0, None, None
            while conn is not None and tries < CLEAN_UP_TRIES:
                try:
                    tries += 1
                    if conn is not PLACE:
                        conn.disconnect()
                    self._failed()
                    claim = claim or threading.Lock()
                    self._settling.spawn(self._give_up, claim, pool, conn, call)
                    break
                except BaseException as interrupt:
                    late = interrupt
            if late is not None:
                raise late from error
            if self.closed and isinstance(error, Exception):  # see `closed`
                raise ClientClosedError("the client is closed") from error
            raise
        return sent

    def receive(self, sent: Sent, timeout: float | None) -> Any:
        """The reply to a script sent by `send()` (EVAL follows on NOSCRIPT).

        ``timeout`` as `tenure._redis.read_reply()`: with 0 and no reply yet it
        raises ``NotReady`` and ``sent`` stays open for a later ``receive``; a reply that
        does not come in time drops the connection and raises (redis-py errors unchanged).
        """
        pool, held, call = sent.pool, sent.held, sent.call
        conn = held[0]
        try:
            try:
                try:
                    reply = read_reply(conn, timeout)
                except NoScriptError:
                    if not isinstance(call, Call):
                        raise
                    script, keys = call.script, call.keys
                    send_command(
                        conn, "EVAL", script.source, len(keys), *keys, *call.args
                    )
                    reply = conn.read_response()
            except ResponseError:
                self._done(pool, held)
                raise
            self.suspect = False
            self._done(pool, held)
            return reply
        except NotReady:  # ``sent`` keeps it, for a later receive
            raise
        except BaseException as error:  # the reply may still be on its way: never reuse it
            # As in `send()`: once, in the background, whatever interrupts the clean-up;
            # out of ``sent`` once under way (`abandon()` then finds nothing to do).
            tries, claim, late = 0, None, None
            while held[0] is not None and tries < CLEAN_UP_TRIES:
                try:
                    tries += 1
                    conn.disconnect()
                    self._failed()
                    claim = claim or threading.Lock()
                    self._settling.spawn(self._give_up, claim, pool, conn, call)
                    held[0] = None
                    break
                except BaseException as interrupt:
                    late = interrupt
            if late is not None:
                raise late from error
            if self.closed and isinstance(error, Exception):  # see `closed`
                raise ClientClosedError("the client is closed") from error
            raise

    def abandon(self, sent: Sent) -> None:
        """The caller of `receive()` was interrupted (a signal handler's exception, a
        cancellation) and will not read ``sent``'s reply: its connection is given up as
        ``receive`` gives it up, unless ``receive`` did (the interrupt came inside it). For
        the place where a handler runs as ``receive`` begins, before any of its code."""
        pool, held, call = sent.pool, sent.held, sent.call
        conn = held[0]
        tries, claim, late = 0, None, None
        while held[0] is not None and tries < CLEAN_UP_TRIES:
            try:
                tries += 1
                conn.disconnect()
                self._failed()
                claim = claim or threading.Lock()
                self._settling.spawn(self._give_up, claim, pool, conn, call)
                held[0] = None
                break
            except BaseException as interrupt:
                late = interrupt
        if late is not None:
            raise late

    def _connection(self, pool: Any, held: list[Any]) -> Any:
        """A connection for one command: a spare one if it is still clean, else the pool's.

        It is noted in ``held``, the caller's slot (made before the caller's ``try``) as
        it leaves the spares or tenure's pool, with no call between where a signal handler
        could run (`tenure._redis.LENDING`); `_done()` takes it out as it goes back. So
        whatever the place of an interrupt, the connection is in one of them, and the
        caller's clean-up gives back what ``held`` still holds. (Before, one right after
        ``pool.get_connection()`` or ``spare.pop()`` returned, or inside redis-py's
        lending, lost a place of the pool for good.)"""
        if self.spare and not self.route.cluster:
            with self._spares:  # no call between the take and the note
                if self.spare:
                    held[0] = self.spare[-1]
                    del self.spare[-1]
            conn = held[0]
            if conn is not None:
                try:
                    clean = idle(conn)  # connects it again if it was dropped
                except BaseException:
                    # An interrupt in that connect (its handshake perhaps half done): dropped
                    # and given back now. Another interrupt meanwhile leaves it in ``held``
                    # (or back already), for the caller's clean-up.
                    conn.disconnect()
                    self._failed()
                    self._release(pool, held)
                    raise
                if clean:
                    return conn
                # Data or EOF on it (the server closed it, or died and came back): drop the
                # socket so that the pool connects anew. redis-py's asyncio pool skips its
                # own check when RESP3 maintenance notifications are on, and would lend it
                # as it is: the command would go to a dead socket and fail as if it may
                # have run.
                conn.disconnect()
                self._release(pool, held)
        LENDING.held = held
        try:
            conn = pool.get_connection()
        except BaseException as error:  # refused: the node may be gone
            self._failed()
            if not isinstance(error, RedisError | OSError):
                _handshakes_anew(pool)
            raise
        finally:
            LENDING.held = None
        held[0] = conn  # a pool of redis-py's own (tenure's noted it as it lent it)
        if torn(conn):  # its command connects it anew
            conn.disconnect()
        return conn

    def _done(self, pool: Any, held: list[Any]) -> None:
        """Give back the connection in ``held``, its reply read: kept as a spare, or to the
        pool; out of ``held`` as it goes in (see `_connection()`)."""
        if self._park and len(self.spare) < SPARE and not self.route.cluster:
            # One C operation (another thread's sees the list before or after it), then
            # out of ``held``, with no call between: no lock needed.
            self.spare += (held[0],)
            held[0] = None
            return
        self._release(pool, held)

    def _release(self, pool: Any, held: list[Any]) -> None:
        """Give the connection in ``held`` back to ``pool``: tenure's takes it out of
        ``held`` as it puts it back (`tenure._redis.LENDING`)."""
        LENDING.held = held
        try:
            pool.release(held[0])
        finally:
            LENDING.held = None
        held[0] = None  # a pool of redis-py's own

    def close(self) -> None:
        """Give the spare connections back to the pool; calls in flight now fail with
        ClientClosedError (see `closed`)."""
        self.closed = True
        pool = self.route.client.connection_pool if not self.route.cluster else None
        while self.spare:
            conn = self.spare.pop()
            if pool is not None:
                pool.release(conn)

    def _drop(self, pool: Any, conn: Any) -> None:
        """Disconnect (a reply may still be on its way) and give ``conn`` (or a place of
        the pool: `tenure._redis.PLACE`) back."""
        try:
            if conn is not PLACE:
                try:
                    conn.disconnect()
                except BaseException:
                    # A signal handler (or a cancellation) cut redis-py's disconnect short:
                    # its parser may be reset with the socket still set, which the pool
                    # would lend as it is (the next reply read fails with AttributeError).
                    # Finish it: the disconnect is idempotent.
                    conn.disconnect()
                    raise
            self._failed()
        finally:
            give_back(pool, conn)

    def _routed(self, key: str | None, send: Any, what: Any) -> Any:
        """``send(conn, what)`` on the node serving ``key``, following redirections.
        Raises `Unsent` when no connection could be made (nothing was sent)."""
        pool = self._pool_for(key)
        asking = False
        for _ in range(REDIRECTS):
            try:
                return self._on(pool, send, what, asking)
            except MovedError as moved:
                self.route.moved(moved)
                pool, asking = self._pool_for(key), False
            except AskError as ask:
                pool, asking = self.route.pool_at(ask.host, ask.port), True
            except TryAgainError:  # did not run: the slot is half-migrated for a moment
                sleep(TRY_AGAIN)
                pool, asking = self._pool_for(key), False
        return self._on(pool, send, what, asking)

    def _pool_for(self, key: str | None) -> Any:
        """The route's pool for ``key``; a failure to reach a server while finding it (the
        first use asks the server, INFO) raises `Unsent`."""
        try:
            return self.route.pool_for(key)
        except RedisError as error:
            self.suspect = True
            if unsent(error):
                raise Unsent(error) from error  # nothing was sent
            raise

    def _on(self, pool: Any, send: Any, what: Any, asking: bool) -> Any:
        """``send(conn, what)`` on a connection of ``pool``; `Unsent` when no
        connection could be made. Any failure after that is raised as it is."""
        held: list[Any] = [None]  # the connection while it is this call's (`_connection`)
        try:
            try:
                conn = self._connection(pool, held)
            except RedisError as error:
                if unsent(error):
                    raise Unsent(error) from error  # nothing was sent
                raise
            try:
                if asking:
                    send_command(conn, "ASKING")
                    conn.read_response()
                reply = send(conn, what)
            except ResponseError:  # a whole reply: the connection is clean
                self._done(pool, held)
                raise
            self.suspect = False
            self._done(pool, held)
            return reply
        except BaseException as error:  # the reply may still be on its way: never reuse it
            # Given up in the background (`_give_up`): where no signal handler runs, so that
            # the connection goes back to the pool exactly once (redis-py's sync pool takes
            # the same connection twice) and a call with settle keeps its reader. A second
            # interrupt (a signal handler raising) may land anywhere here: the clean-up runs
            # again from the top, up to CLEAN_UP_TRIES (docs/internals.md, "Cancellation and
            # interruption"); each step is idempotent, ``claim`` runs the give-up once
            # however often it was spawned. No call before the ``try``. Nothing to do when
            # ``held`` is empty: no connection taken, or it is back (the call failed before
            # it had one, or went back to the pool: a whole error reply).
            conn = held[0]
            tries, claim, late = 0, None, None
            while conn is not None and tries < CLEAN_UP_TRIES:
                try:
                    tries += 1
                    if conn is not PLACE and id(conn) not in self._handed:
                        conn.disconnect()  # no reply to read: drop the socket now
                        self._failed()  # before the caller's next command (a slot map)
                    claim = claim or threading.Lock()
                    self._settling.spawn(self._give_up, claim, pool, conn, what)
                    break
                except BaseException as interrupt:
                    late = interrupt
            if late is not None:
                raise late from error
            if self.closed and isinstance(error, Exception):  # see `closed`
                raise ClientClosedError("the client is closed") from error
            raise

    def _give_up(self, claim: threading.Lock, pool: Any, conn: Any, call: Any) -> None:
        """The connection of a call that failed or was interrupted (`_on()`, `send()`,
        `receive()`), in the background (run once per ``claim``): disconnected and given
        back; or, for a call with ``settle`` whose reply decides, handed to `_settle_later()`."""
        if not claim.acquire(blocking=False):
            return  # spawned again after an interrupt: the first spawn runs it
        try:
            handed = self._handed.pop(id(conn), self)
            if handed is self:
                self._drop(pool, conn)
            else:  # a call with settle, interrupted: its reply decides
                self._settle_later(pool, conn, call, handed)
        except Exception as failure:  # the background's: logged, never raised to nobody
            log.warning("tenure: giving back a failed call's connection failed: %r", failure)

    def _settle_later(self, pool: Any, conn: Any, call: Call, reply: Any) -> None:
        """The caller of ``call`` stopped waiting while it was in flight: read its reply
        (unless ``reply`` is known already), give the connection back (or drop it), and
        run the flow ``call.settle(reply, True)`` returns (the undo of what the script did;
        ``reply`` is the error instance when none came)."""
        if reply is _UNREAD:
            try:
                reply = read_reply(conn, self._settle_read(conn))
            except NoScriptError:  # EVALSHA did not run: nothing to undo
                reply = NOT_RUN
                self._done(pool, [conn])
            except BaseException as error:  # no reply (or not the whole script was sent)
                reply = error
                self._drop(pool, conn)
            else:
                self._done(pool, [conn])
        elif reply is NOT_RUN:  # nothing sent (a connect perhaps cut short): no failure
            try:
                conn.disconnect()
            finally:
                give_back(pool, conn)
        else:  # the reply was read; a WAIT for replicas may still be unread
            self._drop(pool, conn)
        assert call.settle is not None
        assert self.settle is not None
        undo = call.settle(reply, True)
        if undo is not None:
            self.settle(undo)

    def _settle_read(self, conn: Any) -> float | None:
        """How long `_settle_later()` waits for a reply: redis-py's socket timeout (None),
        or with none set (``socket_timeout=None``) at most `settle_read_bound()`: a
        server that never answers must not keep a thread (or task) and a connection out
        of the pool for ever."""
        if getattr(conn, "socket_timeout", None):
            return None
        return settle_read_bound(self.ctx)

    def _command(self, conn: Any, args: Any) -> Any:
        send_command(conn, *args)
        return conn.read_response()

    def _script(self, conn: Any, call: Call) -> tuple[Any, int | None]:
        script, keys = call.script, call.keys
        if self.route.sharded:
            script = sharded(script)
        if call.settle is not None and self.settle is not None:
            reply = self._kept(conn, call, script)
        else:
            try:
                send_command(
                    conn, "EVALSHA", script.sha, len(keys), *keys, *call.args
                )
                reply = conn.read_response()
            except NoScriptError:
                send_command(
                    conn, "EVAL", script.source, len(keys), *keys, *call.args
                )
                reply = conn.read_response()
        wait = replica_wait(self.ctx, call, reply)
        if wait is None:
            return reply, None
        send_command(conn, "WAIT", *wait)
        return reply, int(conn.read_response())

    def _kept(self, conn: Any, call: Call, script: Any) -> Any:
        """Send ``call`` (a call with ``settle``) and read its reply, keeping ``conn`` for
        `_settle_later()` if the caller stops waiting meanwhile (docs/primitives/semaphore.md:
        from before the first byte goes out until the reply is handed to ``call.settle``).
        The reply is parsed while it is still on the socket (`tenure._redis.read_kept()`)
        and noted in `_handed` before it is taken off and ``call.settle(reply, False)``
        records it for the flow, with no call in between where a signal handler could
        run: so whatever the moment of an interrupt, exactly one of the flow and
        `_settle_later()` undoes what the script did.

        Each send is noted first (`Call.settle`: ``SENDING``, after the connection is up;
        ``NOT_RUN`` after a NOSCRIPT reply), with `_handed` saying `NOT_RUN` until the
        note is made: whatever the moment of an interrupt, the flow and `_settle_later()`
        agree on whether the script may have been sent, and nothing is read for a script
        that was not."""
        keys, handed, at = call.keys, self._handed, id(conn)
        assert call.settle is not None
        handed[at] = NOT_RUN
        try:
            try:
                command = ("EVALSHA", script.sha, len(keys), *keys, *call.args)
                conn.connect()  # a torn connection connects anew: nothing sent yet
                call.settle(SENDING, False)
                handed[at] = _UNREAD  # no call before the send: it may run from here on
                send_kept(conn, *command)
                kept = read_kept(conn)
            except NoScriptError:
                handed[at] = NOT_RUN  # the EVALSHA did not run, and the EVAL is not sent
                command = ("EVAL", script.source, len(keys), *keys, *call.args)
                call.settle(NOT_RUN, False)
                call.settle(SENDING, False)
                handed[at] = _UNREAD
                send_kept(conn, *command)
                kept = read_kept(conn)
        except RedisError:  # an error reply or a socket error: the flow gets it, as ever
            handed.pop(at, None)
            raise
        reply = kept.value
        handed[at] = reply  # known from here on, though still on the socket
        kept.take(conn)
        call.settle(reply, False)
        handed.pop(at, None)
        return reply
