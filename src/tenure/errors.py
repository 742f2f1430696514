"""The errors tenure raises. Every one derives from [`LockError`][tenure.errors.LockError]."""

from __future__ import annotations


class LockError(Exception):
    """Base class of every tenure error."""


class NotOwnedError(LockError, RuntimeError):
    """The caller released (or extended) a lock it holds no hold on.

    Raised by ``release()`` when the caller never acquired the lock, or already released
    every hold it had.
    """


class LockLostError(NotOwnedError):
    """The caller held the lock, but its hold expired or was taken away before release.

    Raised by ``release()`` and on ``with`` exit. The loss was possibly already reported
    through ``lock.lost`` and the ``on_lost`` callback.
    """


class LockTimeout(LockError, TimeoutError):
    """``with lock(timeout=...)`` could not acquire the lock before its wait time ran out."""


class BackendError(LockError, ConnectionError):
    """The connection to the server failed: it could not be reached, was reset, or did not
    answer in time (or the server was busy: loading, a script running, a failover under
    way). Trying again later may succeed.

    The redis-py error that caused it is chained as ``__cause__``. A refusal that trying
    again cannot cure is a [`ServerError`][tenure.errors.ServerError] instead.
    """


class ClientClosedError(BackendError):
    """The client was closed (``close()``, or its ``with`` block ended): it sends no more
    commands and waits for nothing. Raised by any call made after that, and to a waiter
    or background clean-up it cut short. Trying again with this client cannot succeed; a
    [`BackendError`][tenure.errors.BackendError], so ``except BackendError`` still catches
    it.
    """


class ServerError(LockError):
    """The server refused a command, and trying again cannot cure it: a key of the wrong
    type (``WRONGTYPE``), a server that needs a password (``NOAUTH``) or refused the one
    given (``WRONGPASS``), a user whose ACL forbids the command or key (``NOPERM``), or a
    script error. The message gives the server's words and what to do; the redis-py error
    is chained as ``__cause__``.
    """


def refusal(error: BaseException) -> str | None:
    """What to tell the caller when redis-py ``error`` is a refusal that retrying cannot
    cure (a [`ServerError`][tenure.errors.ServerError]); None for any other error (a
    [`BackendError`][tenure.errors.BackendError])."""
    words = str(error)
    code = words.split(" ", 1)[0]
    kind = type(error).__name__

    def said(tag: str) -> str:  # redis-py drops the error code from some messages
        return words if code == tag else f"{tag} {words}"

    wrong = code == "WRONGPASS" or "invalid" in words.lower() or "AuthenticationWrongNumber" in kind
    if code == "NOAUTH" or (kind == "AuthenticationError" and not wrong):
        return (
            f"the server needs a password ({said('NOAUTH')}): give it in the URL "
            "(redis://user:password@host:port/0) or to the redis-py client"
        )
    if wrong or kind == "AuthenticationError":
        return f"the server refused the username or password ({said('WRONGPASS')}): check them"
    if code == "NOPERM" or kind == "NoPermissionError":
        return (
            f"the server's ACL does not allow this ({said('NOPERM')}): grant the user the commands "
            "and keys tenure uses (`tenure doctor` lists them)"
        )
    if code == "WRONGTYPE":
        return (
            f"a key holds the wrong type of value ({words}): the name is used by something "
            "else on this server; choose another name"
        )
    if "user_script" in words or "Error running script" in words or (
        "Error compiling script" in words
    ):
        return f"a script failed on the server ({words})"
    return None


class LockUpgradeError(LockError):
    """A caller holding only read holds of a ReadWriteLock asked for its write lock.

    Waiting would deadlock on the caller's own read holds, so this is raised at once.
    """


class LockKindError(LockError):
    """The name's keys were written by another kind of primitive, or hold the wrong type.

    Lock, FairLock and FencedLock share one hash layout and exclude one another on the same
    name (as in Redisson); a ReadWriteLock's hash (with its ``mode`` field) is another
    family. A script refuses, before any write, a key of the other family or of a wrong
    type (say a STRING where a lock hash belongs), and the operation raises this at once,
    never waiting (the other kind publishes on another channel). Nothing was changed.
    """


class ReplicationError(BackendError):
    """Fewer replicas than ``wait_for_replicas`` acknowledged a lock change in time.

    The change itself took effect on the primary: an acquisition is undone (the hold is
    released again) before this reaches the caller; a release stays done. ``reply`` is the
    script's reply on the primary, ``acknowledged`` the number of replicas that confirmed.
    """

    def __init__(self, message: str, *, reply: object = None, acknowledged: int = 0) -> None:
        super().__init__(message)
        self.reply = reply
        self.acknowledged = acknowledged
