"""A runner's connection to the planner server: credentials and token from the options, and the
first call (the served model's info), with one-line errors for what can go wrong there."""

from __future__ import annotations

import logging
import sys

from l3p.clients.client import (
    ModelInfo,
    NotFound,
    PlannerClient,
    PlannerError,
    channel_credentials,
    read_token,
)
from l3p.clients.protocol import EnvMismatchError, served_env_id
from l3p.clients.run_config import ConnectionConfig
from l3p.core.errors import UNAVAILABLE, USAGE, L3PError


class ConnectionConfigError(L3PError):
    """A TLS or token file cannot be used."""

    exit_code = USAGE


class ServerUnreachable(L3PError):
    """The planner server did not answer the first call: down, a wrong address, TLS or token refused."""

    exit_code = UNAVAILABLE


def connect(args: ConnectionConfig) -> tuple[PlannerClient, ModelInfo, str]:
    """Client, the server's model info, and the env id to run (--env or ``served_env_id``)."""
    if args.verbose:
        show_retries()
    tls = args.tls_ca or args.tls_cert or args.tls_key
    try:
        credentials = channel_credentials(args.tls_ca, args.tls_cert, args.tls_key) if tls else None
        token = read_token(args.token_file) if args.token_file else None
    except (OSError, ValueError) as err:
        raise ConnectionConfigError(str(err)) from None
    client = PlannerClient(args.server, timeout_s=args.timeout, credentials=credentials, token=token,
                           tls_server_name=args.tls_server_name, model=args.model)
    try:
        info = client.model_info()
        env_id = args.env or served_env_id(info)
    except NotFound as err:  # the server answered: it does not serve that model
        client.close()
        raise EnvMismatchError(f"{args.server}: {err.message}") from None
    except PlannerError as err:
        client.close()
        raise ServerUnreachable(f"cannot reach the planner server at {args.server}: {err}") from err
    except BaseException:
        client.close()
        raise
    return client, info, env_id


def show_retries() -> None:
    """The client library's retry lines (INFO, otherwise silent) on stderr as they happen."""
    log = logging.getLogger("l3p.clients")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)
