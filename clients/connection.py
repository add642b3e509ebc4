"""A client command's connection to the planner server: credentials and token from the options, and
the first call, with one-line errors for what can go wrong there. The robot library alone (no
simulator): ``l3p models`` uses it in the base install; ``connect`` (run, eval) adds the env."""

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
from l3p.clients.run_config import ConnectionConfig, ServerOptions
from l3p.core.errors import UNAVAILABLE, USAGE, L3PError


class ConnectionConfigError(L3PError):
    """A TLS or token file cannot be used."""

    exit_code = USAGE


class ServerUnreachable(L3PError):
    """The planner server did not answer the first call: down, a wrong address, TLS or token refused."""

    exit_code = UNAVAILABLE


def open_client(args: ServerOptions, model: str | None = None) -> PlannerClient:
    """A client for ``args.server`` with the options' TLS files and token (and, with -v, its retries
    on stderr); nothing is called yet."""
    if args.verbose:
        show_retries()
    tls = args.tls_ca or args.tls_cert or args.tls_key
    try:
        credentials = channel_credentials(args.tls_ca, args.tls_cert, args.tls_key) if tls else None
        token = read_token(args.token_file) if args.token_file else None
    except (OSError, ValueError) as err:
        raise ConnectionConfigError(str(err)) from None
    return PlannerClient(args.server, timeout_s=args.timeout, credentials=credentials, token=token,
                         tls_server_name=args.tls_server_name, model=model)


def unreachable(args: ServerOptions, err: PlannerError) -> ServerUnreachable:
    return ServerUnreachable(f"cannot reach the planner server at {args.server}: {err}")


def connect(args: ConnectionConfig) -> tuple[PlannerClient, ModelInfo, str]:
    """Client, the server's model info, and the env id to run (--env or ``served_env_id``)."""
    from l3p.clients.protocol import EnvMismatchError, served_env_id  # the simulator: run and eval only

    client = open_client(args, args.model)
    try:
        info = client.model_info()
        env_id = args.env or served_env_id(info)
    except NotFound as err:  # the server answered: it does not serve that model
        client.close()
        raise EnvMismatchError(f"{args.server}: {err.message}") from None
    except PlannerError as err:
        client.close()
        raise unreachable(args, err) from err
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
