"""Who may call the planner, and who a caller is: bearer tokens, TLS credentials, principals.

- A token file (``--auth-token-file``) holds one token per line, ``name:token`` or a bare
  ``token`` (named ``line-N``); blank lines and ``#`` comments are skipped. Only sha256 digests
  of the tokens are kept, and a presented token is compared with every one of them in constant
  time (hmac.compare_digest).
- Every Planner RPC must carry ``authorization: Bearer <token>``; the interceptor answers
  UNAUTHENTICATED otherwise. Health and reflection are not Planner RPCs: load-balancer probes
  need no token.
- ReloadModels (an operator's call: it makes the server load new model versions) takes only a
  token of ``--admin-token-file``; a robot's valid token is answered PERMISSION_DENIED (a missing
  or unknown token UNAUTHENTICATED); without that file nobody may call it.
- A caller's principal names what it authenticated with: ``token:NAME`` and/or ``cert:CN`` (the
  client certificate's common name under mutual TLS), or ``""`` when the server asks for neither.
  Sessions belong to the principal that opened them (serving/sessions.py).

Token values never leave this module: not in errors, logs or metrics.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc

from l3p.core.errors import L3PError
from l3p.serving.config import ServeConfig

AUTH_HEADER = "authorization"
_BEARER = re.compile(r"bearer\s+(\S+)\s*$", re.IGNORECASE)  # the scheme is case-insensitive (RFC 7235)
_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
MIN_TOKEN_CHARS = 16

MISSING_TOKEN = ("this server requires a bearer token: send metadata "
                 "'authorization: Bearer <token>' with every Planner call")
WRONG_TOKEN = "the bearer token is not accepted by this server"
NOT_ADMIN = ("this token may not call {method}: it takes a token of the server's --admin-token-file "
             "(an operator's, not a robot's)")
# Planner methods for operators, not robots: they take admin tokens only.
ADMIN_METHODS = ("ReloadModels",)


class SecurityConfigError(L3PError, ValueError):
    """A security option cannot be used as given; the message names the option and the file."""


class TokenFileError(SecurityConfigError):
    pass


class TlsConfigError(SecurityConfigError):
    pass


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class TokenTable:
    """Accepted tokens as (name, sha256 digest) pairs."""

    entries: tuple[tuple[str, bytes], ...]

    @classmethod
    def from_lines(cls, lines: Iterable[str], source: str = "token file") -> TokenTable:
        entries: list[tuple[str, bytes]] = []
        for number, raw in enumerate(lines, start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, token = line.partition(":")
            if not sep:  # a bare token is named by its line (a digest in logs would be a verifier)
                name, token = f"line-{number}", line
            where = f"{source} line {number}"
            if not _NAME.fullmatch(name):
                raise TokenFileError(f"{where}: the name must be 1-64 of A-Z a-z 0-9 _ . @ -")
            if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
                raise TokenFileError(
                    f"{where}: a token must be at least {MIN_TOKEN_CHARS} characters without "
                    f"spaces (e.g. from: openssl rand -hex 32)")
            if any(name == other for other, _ in entries):
                raise TokenFileError(f"{where}: the name {name!r} is used twice")
            entries.append((name, _digest(token)))
        if not entries:
            raise TokenFileError(f"{source} holds no token")
        return cls(tuple(entries))

    @classmethod
    def load(cls, path: Path) -> TokenTable:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise TokenFileError(f"token file {path}: {exc.strerror}") from None
        return cls.from_lines(text.splitlines(), f"token file {path}")

    def name_of(self, token: str) -> str | None:
        """The name of this token, or None. Every entry is compared, so the time taken does not
        depend on which entry (if any) matches."""
        presented = _digest(token)
        found = None
        for name, digest in self.entries:
            if hmac.compare_digest(presented, digest):
                found = name
        return found


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The token of the first ``authorization: Bearer`` entry, or None."""
    for key, value in metadata or ():
        if key == AUTH_HEADER and isinstance(value, str):
            match = _BEARER.match(value)
            return match.group(1) if match else None
    return None


def cert_name(auth_context: Mapping[str, Iterable[bytes]]) -> str | None:
    """The verified client certificate's common name (mutual TLS), or None."""
    names = auth_context.get("x509_common_name") or ()
    for name in names:
        return name.decode(errors="replace")
    return None


class Gatekeeper:
    """Admits Planner calls and names their callers.

    ``tokens`` None: no token is required (the principal then comes from the client certificate,
    if any, or is ``""``). ``admin``: the tokens of admin calls (ADMIN_METHODS); None: nobody's."""

    def __init__(self, tokens: TokenTable | None, admin: TokenTable | None = None):
        self.tokens = tokens
        self.admin = admin

    def refusal(self, metadata, method: str = "") -> tuple[grpc.StatusCode, str] | None:
        """The status and reason a call of ``method`` with this metadata is refused with, or None
        to admit it: UNAUTHENTICATED without an accepted token, PERMISSION_DENIED for a robot's
        valid token on an admin call."""
        return self.token_refusal(bearer_token(metadata), method)

    def token_refusal(self, token: str | None, method: str = "") -> tuple[grpc.StatusCode, str] | None:
        """`refusal` for a token already read from the call (None: it sent none)."""
        table = self.admin if method in ADMIN_METHODS else self.tokens
        if table is None:
            return None  # admin calls without admin tokens are refused by the handler itself
        if token is None:
            return grpc.StatusCode.UNAUTHENTICATED, MISSING_TOKEN
        if table.name_of(token) is not None:
            return None
        if table is self.admin and self.tokens is not None and self.tokens.name_of(token) is not None:
            return grpc.StatusCode.PERMISSION_DENIED, NOT_ADMIN.format(method=method)
        return grpc.StatusCode.UNAUTHENTICATED, WRONG_TOKEN

    def principal(self, context: grpc.ServicerContext) -> str:
        """``token:NAME``, ``cert:CN``, both joined by a space, or ``""``. Call only for admitted
        calls (the token was checked)."""
        return self.principal_of(bearer_token(context.invocation_metadata()),
                                 cert_name(context.auth_context()))

    def principal_of(self, token: str | None, cert: str | None) -> str:
        """`principal` from the call's token and its client certificate's common name."""
        parts = []
        if self.tokens is not None and token is not None and self.tokens.name_of(token):
            parts.append(f"token:{self.tokens.name_of(token)}")
        elif self.admin is not None and token is not None and self.admin.name_of(token):
            parts.append(f"admin:{self.admin.name_of(token)}")
        elif self.tokens is not None:
            parts.append("token:None")
        if cert is not None:
            parts.append(f"cert:{cert}")
        return " ".join(parts)


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Refuses calls to the methods under ``service`` without an accepted token; other services
    (health, reflection) pass. ``on_refused(method, code, reason)`` reports each refusal."""

    def __init__(self, gate: Gatekeeper, service: str,
                 on_refused: Callable[[str, grpc.StatusCode, str], None]):
        self._gate = gate
        self._prefix = f"/{service}/"
        self._on_refused = on_refused

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not method.startswith(self._prefix):
            return handler
        name = method.rsplit("/", 1)[-1]
        refusal = self._gate.refusal(handler_call_details.invocation_metadata, name)
        if refusal is None:
            return handler
        self._on_refused(name, *refusal)
        return _refusing(handler, *refusal)


def _refusing(handler: grpc.RpcMethodHandler, code: grpc.StatusCode, reason: str) -> grpc.RpcMethodHandler:
    """A handler of the same kind as ``handler`` that answers ``code`` without reading."""

    async def refuse(request, context):
        await context.abort(code, reason)

    kind = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }[(handler.request_streaming, handler.response_streaming)]
    return kind(refuse, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)


# -- TLS


def _read(path: Path, what: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"{what} {path}: {exc.strerror}") from None
    if b"-----BEGIN" not in data:
        raise TlsConfigError(f"{what} {path}: not a PEM file")
    return data


def server_credentials(cert: Path, key: Path, client_ca: Path | None) -> grpc.ServerCredentials:
    """TLS for the listening port; with ``client_ca``, clients must present a certificate it
    signed (mutual TLS), else the handshake fails."""
    pair = (_read(key, "--tls-key"), _read(cert, "--tls-cert"))
    # gRPC reports a bad pair only as "Failed to bind"; Python's ssl names the problem.
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise TlsConfigError(f"--tls-cert {cert} / --tls-key {key}: {exc.reason or exc}") from None
    if client_ca is None:
        return grpc.ssl_server_credentials([pair])
    return grpc.ssl_server_credentials(
        [pair], root_certificates=_read(client_ca, "--tls-client-ca"), require_client_auth=True)


def server_tls_context(cert: Path, key: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """TLS for a listener Python's ssl serves (/metrics, the openpi websocket): the server's
    certificate and, with ``client_ca``, mutual TLS (a client certificate it signed is required)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    if client_ca is not None:
        context.load_verify_locations(client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


@dataclass(frozen=True)
class Security:
    credentials: grpc.ServerCredentials | None  # None: plaintext
    gate: Gatekeeper | None  # None: no token, no client certificate: everyone is one principal
    metrics_tls: ssl.SSLContext | None = None  # /metrics over TLS (the server's certificate)
    metrics_tokens: TokenTable | None = None  # None: /metrics needs no token


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def security_from_config(config: ServeConfig) -> Security:
    """Credentials and gatekeeper from the options; SecurityConfigError names what is wrong."""
    if (config.tls_cert is None) != (config.tls_key is None):
        raise TlsConfigError("--tls-cert and --tls-key go together")
    if config.tls_client_ca is not None and config.tls_cert is None:
        raise TlsConfigError("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")
    if config.tls_cert is None and not config.insecure and not is_loopback(config.host):
        raise TlsConfigError(
            f"--host {config.host} is not loopback: serve TLS (--tls-cert/--tls-key), or pass "
            f"--insecure if something else protects the traffic")
    if (config.metrics_port and config.tls_cert is None and not config.insecure
            and not is_loopback(config.metrics_host)):
        raise TlsConfigError(
            f"--metrics-host {config.metrics_host} is not loopback: serve TLS (--tls-cert/--tls-key, "
            f"used for /metrics too), or pass --insecure if something else protects the traffic")
    credentials = metrics_tls = None
    if config.tls_cert is not None:
        credentials = server_credentials(config.tls_cert, config.tls_key, config.tls_client_ca)
        metrics_tls = server_tls_context(config.tls_cert, config.tls_key)
    tokens = TokenTable.load(config.auth_token_file) if config.auth_token_file is not None else None
    admin = TokenTable.load(config.admin_token_file) if config.admin_token_file is not None else None
    gate = (Gatekeeper(tokens, admin)
            if tokens is not None or admin is not None or config.tls_client_ca is not None else None)
    metrics_tokens = (TokenTable.load(config.metrics_token_file)
                      if config.metrics_token_file is not None else None)
    return Security(credentials, gate, metrics_tls, metrics_tokens)
