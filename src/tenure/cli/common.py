"""What every operator command shares: ``--url``, one-line errors, formatting."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
import redis

import tenure
from tenure.embedded import Terminated

DEFAULT_URL = "redis://127.0.0.1:6379/0"
URL_ENV = "TENURE_URL"

F = TypeVar("F", bound=Callable[..., Any])


def url_option(command: F) -> F:
    """``--url URL``: default ``$TENURE_URL``, else ``redis://127.0.0.1:6379/0``."""
    return click.option(
        "--url",
        envvar=URL_ENV,
        default=DEFAULT_URL,
        show_default=True,
        metavar="URL",
        help=f"Server URL (redis://host:port/db, rediss://, unix://); also ${URL_ENV}.",
    )(command)


def json_option(command: F) -> F:
    """``--json``: machine-readable output."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(
        command
    )


def positive(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Option callback: seconds above 0 (or None)."""
    if value is not None and value <= 0:
        raise click.BadParameter("must be above 0 seconds")
    return value


def timeout_option(wait: str) -> Callable[[F], F]:
    """``--timeout S`` of a command that waits ``wait`` ("for the lock", "to be elected")."""
    return click.option(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help=f"Seconds to wait {wait} (default: forever; 0: one attempt). "
        "Exit status 75 when it runs out.",
    )


def watchdog_option(lease: str) -> Callable[[F], F]:
    """``--watchdog-timeout S`` (default 30, above 0), ``lease`` saying what it is."""
    return click.option(
        "--watchdog-timeout",
        type=float,
        default=30.0,
        show_default=True,
        metavar="S",
        callback=positive,
        help=lease,
    )


def grace_option(hold: str) -> Callable[[F], F]:
    """``--grace S``: from SIGTERM to SIGKILL of COMMAND once ``hold`` is lost."""
    return click.option(
        "--grace",
        type=float,
        default=10.0,
        show_default=True,
        metavar="S",
        help=f"Seconds between SIGTERM and SIGKILL when {hold} is lost.",
    )


def one_line(error: BaseException) -> str:
    """An error as one readable line (no traceback)."""
    if isinstance(error, tenure.BackendError) and error.__cause__ is not None:
        error = error.__cause__
    if isinstance(error, redis.ConnectionError | redis.TimeoutError):
        return f"cannot reach the server: {str(error).splitlines()[0]}"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


class Group(click.Group):
    """A click group whose commands report errors as one line and exit with status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except Terminated as signalled:  # SIGTERM (tenure.embedded's handler): 128 + 15
            raise click.exceptions.Exit(128 + signalled.signum) from None
        except KeyboardInterrupt:  # Ctrl-C: 128 + SIGINT, no traceback
            raise click.exceptions.Exit(130) from None
        except (tenure.LockError, redis.RedisError, OSError, ValueError, TypeError) as error:
            click.echo(f"tenure: error: {one_line(error)}", err=True)
            sys.exit(1)


def client(url: str, **kwargs: Any) -> tenure.Client:
    """A tenure client on ``url``; a bad URL is reported as a usage error."""
    try:
        return tenure.Client(url, **kwargs)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--url") from None


def seconds(value: float | None) -> str:
    """Seconds for people: ``12.3 s``, ``no expiry``, ``-``."""
    if value is None:
        return "-"
    if math.isinf(value):
        return "no expiry"
    return f"{value:.3f} s" if value < 10 else f"{value:,.1f} s"


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, allow_nan=False))


def is_tty() -> bool:
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
