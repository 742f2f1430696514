"""The errors tenure raises. Every one derives from :class:`LockError`."""

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
    """The server could not be reached, did not answer in time, or refused a command.

    The redis-py error that caused it is chained as ``__cause__``.
    """


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
