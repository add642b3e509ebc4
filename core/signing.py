"""Signed bundles: the training side signs a bundle's digest, the model it is for and a sequence
with its Ed25519 key; the serving side loads only bundles signed by a key it trusts (``l3p serve
--trusted-keys FILE``), for the model it serves them as.

- ``l3p keygen --out PREFIX`` writes ``PREFIX.key`` (the private key, PKCS#8 PEM, mode 0600: it
  stays with the training side) and ``PREFIX.pub`` (one line, ``ed25519 BASE64 NAME``).
- ``l3p export --sign-key KEY --model NAME`` (or ``l3p sign BUNDLE --key KEY --model NAME``) writes
  ``signature.json`` into the bundle: a detached signature over the bundle digest
  (bundle_format.bundle_digest: the manifest, which holds every graph's sha256), the model name and
  the sequence (the signing time in milliseconds), so a signature vouches for every file served,
  for one model, and orders the versions of that model (serving/sequences.py keeps the highest
  served).
- A trusted-keys file is ``.pub`` lines (``cat *.pub``); ``#`` comments and blank lines are skipped.

Ed25519 comes from ``cryptography``, imported inside the functions that need it: ``l3p.core`` stays
importable with the standard library and numpy alone.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from l3p.core.bundle_format import (
    MODEL_NAME,
    BundleDir,
    BundleError,
    bundle_digest,
    escaped,
    problem,
    read_manifest,
    read_regular,
)
from l3p.core.errors import L3PError

SIGNATURE = "signature.json"
SIGNATURE_FORMAT = "l3p-bundle-signature"
SIGNATURE_VERSION = 2
ALGORITHM = "ed25519"
# A signature file is a few hundred bytes; a bigger one is refused unread.
MAX_SIGNATURE_BYTES = 64 * 1024
# What is signed: the digest, the model and the sequence, under a label of its own, so a signature
# made for a bundle can never be taken for a signature over anything else the same key signs.
_CONTEXT = b"l3p-bundle-signature-v2:"
_MAX_SEQUENCE = 2**63 - 1
_KEY_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")


class KeyFileError(L3PError):
    """A key file cannot be used as given; the message names the file and why."""


class SigningError(L3PError):
    """A bundle cannot be signed as asked (a name that cannot be a model's)."""


class SignatureError(BundleError):
    """A bundle's signature is missing, forged, stale, in the old format, by a key that is not
    trusted, or for another model."""


def _ed25519():
    from cryptography.hazmat.primitives.asymmetric import ed25519

    return ed25519


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key (32 raw bytes) and the name the operator gave it."""

    name: str
    raw: bytes

    @property
    def key_sha256(self) -> str:
        """The key's identity in signature files: sha256 of its raw bytes."""
        return hashlib.sha256(self.raw).hexdigest()

    def describe(self) -> str:
        """How the server names the signer: ``NAME (ed25519 sha256:FIRST16)``."""
        return f"{self.name} (ed25519 sha256:{self.key_sha256[:16]})"

    def line(self) -> str:
        return f"{ALGORITHM} {base64.b64encode(self.raw).decode()} {self.name}"


def _parse_public(line: str, where: str) -> PublicKey:
    parts = line.split()
    if len(parts) != 3 or parts[0] != ALGORITHM:
        raise KeyFileError(f"{where}: expected 'ed25519 BASE64 NAME' (a line of a .pub file from l3p keygen)")
    try:
        raw = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raise KeyFileError(f"{where}: the key is not base64") from None
    if len(raw) != 32:
        raise KeyFileError(f"{where}: an Ed25519 public key is 32 bytes, this one {len(raw)}")
    if not _KEY_NAME.fullmatch(parts[2]):
        raise KeyFileError(f"{where}: the name must be 1-64 of A-Z a-z 0-9 _ . @ -")
    return PublicKey(parts[2], raw)


@dataclass(frozen=True)
class TrustedKeys:
    """The public keys whose signatures a server accepts, by key_sha256."""

    keys: dict[str, PublicKey]

    @classmethod
    def from_text(cls, text: str, source: str) -> TrustedKeys:
        keys: dict[str, PublicKey] = {}
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key = _parse_public(line, f"{source} line {number}")
            if key.key_sha256 in keys:
                raise KeyFileError(f"{source} line {number}: the same key as {keys[key.key_sha256].name!r}")
            if any(other.name == key.name for other in keys.values()):
                raise KeyFileError(f"{source} line {number}: the name {key.name!r} is used twice")
            keys[key.key_sha256] = key
        if not keys:
            raise KeyFileError(f"{source} holds no key (expected lines of .pub files from l3p keygen)")
        return cls(keys)

    @classmethod
    def load(cls, path: Path) -> TrustedKeys:
        try:
            text = read_regular(Path(path), MAX_SIGNATURE_BYTES, f"--trusted-keys {path}").decode()
        except FileNotFoundError:
            raise KeyFileError(f"--trusted-keys {path}: no such file") from None
        except (BundleError, UnicodeDecodeError) as exc:
            raise KeyFileError(f"--trusted-keys {path}: not a key file ({exc})") from None
        return cls.from_text(text, f"--trusted-keys {path}")

    def names(self) -> list[str]:
        return sorted(key.name for key in self.keys.values())


# -- the training side


def generate_key_pair(prefix: Path, name: str | None = None) -> tuple[Path, Path]:
    """Writes PREFIX.key (private, 0600) and PREFIX.pub; refuses to overwrite either."""
    from cryptography.hazmat.primitives import serialization

    prefix = Path(prefix)
    name = name or prefix.name
    if not _KEY_NAME.fullmatch(name):
        raise KeyFileError(f"key name {name!r}: use 1-64 of A-Z a-z 0-9 _ . @ - (--name)")
    private_path, public_path = prefix.with_name(prefix.name + ".key"), prefix.with_name(prefix.name + ".pub")
    for path in (private_path, public_path):
        if path.exists():
            raise KeyFileError(f"{path} already exists; keys are never overwritten")
    key = _ed25519().Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    try:
        fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(pem)
        public_path.write_text(PublicKey(name, raw).line() + "\n")
    except OSError as exc:
        raise KeyFileError(f"cannot write the key pair {prefix}: {exc.strerror}") from None
    return private_path, public_path


def load_private_key(path: Path, option: str = "--sign-key"):
    """The Ed25519 private key in ``path`` (PEM, as l3p keygen writes it); KeyFileError (naming
    ``option``) otherwise."""
    from cryptography.hazmat.primitives import serialization

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise KeyFileError(f"{option} {path}: {exc.strerror}") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:  # not PEM, encrypted, unsupported
        raise KeyFileError(f"{option} {path}: not an unencrypted private key PEM ({exc})") from None
    if not isinstance(key, _ed25519().Ed25519PrivateKey):
        raise KeyFileError(f"{option} {path}: not an Ed25519 key (make one with l3p keygen)")
    return key


def public_key_of(private_key, name: str) -> PublicKey:
    from cryptography.hazmat.primitives import serialization

    raw = private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PublicKey(name, raw)


@dataclass(frozen=True)
class Signature:
    """A signature: the key that made it, the model it is for, its sequence."""

    key: PublicKey
    model: str
    sequence: int

    def describe(self) -> str:
        return f"sequence {self.sequence} (signed {signing_time(self.sequence)})"


def _signed_bytes(digest: str, model: str, sequence: int) -> bytes:
    payload = {"bundle_sha256": digest, "model": model, "sequence": sequence}
    return _CONTEXT + json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def signing_time(sequence: int) -> str:
    """A sequence as the signing time it is (UTC, ISO 8601, milliseconds)."""
    try:
        moment = datetime.fromtimestamp(sequence / 1000, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"sequence {sequence}"
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sign_bundle(bundle: Path, private_key, model: str) -> Signature:
    """Writes BUNDLE/signature.json over the bundle's digest (its manifest checked first), for
    model ``model``, with the signing time in milliseconds since the epoch as its sequence."""
    if not isinstance(model, str) or not MODEL_NAME.fullmatch(model):
        raise SigningError(f"model name '{escaped(model)}': 1-64 of A-Z a-z 0-9 _ . -, the first a letter or "
                           "digit (the name the servers serve the bundle as)")
    sequence = time.time_ns() // 1_000_000
    bundle = Path(bundle)
    digest = bundle_digest(read_manifest(bundle))
    signer = public_key_of(private_key, "signer")
    signature = private_key.sign(_signed_bytes(digest, model, sequence))
    record = {"format": SIGNATURE_FORMAT, "format_version": SIGNATURE_VERSION, "algorithm": ALGORITHM,
              "key_sha256": signer.key_sha256, "bundle_sha256": digest, "model": model, "sequence": sequence,
              "signature": base64.b64encode(signature).decode()}
    path = bundle / SIGNATURE
    partial = bundle / f".{SIGNATURE}.partial"
    partial.write_text(json.dumps(record, indent=2) + "\n")
    partial.replace(path)  # a watch never reads half a signature
    return Signature(signer, model, sequence)


# -- the serving side


def verify_bundle(bundle: Path | BundleDir, digest: str, trusted: TrustedKeys, shown: str | None = None,
                  model: str | None = None) -> Signature:
    """The verified signature of the bundle (a directory path, or an open BundleDir) whose manifest
    digest is ``digest``; SignatureError (one line) if it is unsigned, signed in the old format,
    signed for another digest, by a key not in ``trusted``, for a model other than ``model`` (when
    given), or the signature does not verify. Reads only signature.json, never through a link."""
    if not isinstance(bundle, BundleDir):
        with BundleDir.open(bundle, shown) as opened:
            return verify_bundle(opened, digest, trusted, model=model)
    where = bundle.where
    resign = f"l3p sign BUNDLE --key KEY --model {model or 'NAME'}"
    try:
        data = bundle.read(SIGNATURE, MAX_SIGNATURE_BYTES)
    except FileNotFoundError:
        raise SignatureError(f"{where} is not signed (no {SIGNATURE}) and --trusted-keys needs a signature by "
                             f"{' or '.join(trusted.names())}; sign it with {resign}") from None
    try:
        record = json.loads(data)
        if not isinstance(record, dict):
            raise ValueError("not an object")
        if (record.get("format"), record.get("format_version"), record.get("algorithm")) == (
                SIGNATURE_FORMAT, 1, ALGORITHM):
            raise SignatureError(f"{where}/{SIGNATURE} is a format 1 signature, which names no model and no "
                                 f"sequence; re-sign the bundle with {resign}")
        if (record.get("format"), record.get("format_version"), record.get("algorithm")) != (
                SIGNATURE_FORMAT, SIGNATURE_VERSION, ALGORITHM):
            raise ValueError(f"expected format {SIGNATURE_FORMAT!r} version {SIGNATURE_VERSION}, {ALGORITHM}")
        key_sha256, signed_digest = str(record["key_sha256"]), str(record["bundle_sha256"])
        signed_model, sequence = record["model"], record["sequence"]
        if not isinstance(signed_model, str) or not MODEL_NAME.fullmatch(signed_model):
            raise ValueError("'model' is not a model name")
        if not isinstance(sequence, int) or isinstance(sequence, bool) or not 0 < sequence <= _MAX_SEQUENCE:
            raise ValueError("'sequence' is not an integer in [1, 2**63 - 1]")
        signature = base64.b64decode(str(record["signature"]), validate=True)
    except (ValueError, KeyError, RecursionError, binascii.Error) as exc:
        raise SignatureError(f"{where}/{SIGNATURE}: not a bundle signature ({escaped(problem(exc))[:120]})") from None
    key = trusted.keys.get(key_sha256)
    if key is None:
        raise SignatureError(f"{where} is signed by a key that is not in --trusted-keys "
                             f"({', '.join(trusted.names())}); refusing to serve it")
    if signed_digest != digest:
        raise SignatureError(f"{where} has digest {digest}, but its signature is for another digest: the bundle "
                             "changed after it was signed; refusing to serve it")
    from cryptography.exceptions import InvalidSignature

    try:
        _ed25519().Ed25519PublicKey.from_public_bytes(key.raw).verify(
            signature, _signed_bytes(digest, signed_model, sequence))
    except InvalidSignature:
        raise SignatureError(f"{where}: the signature does not verify with key {key.name} (forged or corrupted); "
                             "refusing to serve it") from None
    if model is not None and signed_model != model:
        raise SignatureError(f"{where} is signed for model {signed_model}, not {model}: refusing to serve another "
                             f"model's bundle as {model} (to serve it as {model}, sign it with {resign})")
    return Signature(key, signed_model, sequence)
