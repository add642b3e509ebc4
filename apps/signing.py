"""``l3p keygen`` and ``l3p sign``: the training side's key pair and bundle signatures
(core/signing.py; the operator's flow is docs/guides/signing.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from l3p.core.signing import generate_key_pair, load_private_key, public_key_of, sign_bundle


def add_keygen_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, metavar="PREFIX",
                        help="writes PREFIX.key (the private key, mode 0600: keep it on the training side) "
                             "and PREFIX.pub (for the servers' --trusted-keys file); never overwrites")
    parser.add_argument("--name", help="the key's name in .pub and in what servers report (default: PREFIX's "
                                       "file name)")


def run_keygen(args: argparse.Namespace) -> int:
    private, public = generate_key_pair(args.out, args.name)
    print(f"private key {private} (keep it secret; l3p export --sign-key {private})\n"
          f"public key  {public} (append it to the servers' --trusted-keys file)")
    return 0


def add_sign_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", type=Path, help="the bundle directory to sign (its manifest is checked first)")
    parser.add_argument("--key", type=Path, required=True, metavar="KEY",
                        help="the Ed25519 private key (from l3p keygen)")


def run_sign(args: argparse.Namespace) -> int:
    key = load_private_key(args.key, "--key")
    path = sign_bundle(args.bundle, key)
    signer = public_key_of(key, args.key.stem)
    print(f"signed {args.bundle}: {path.name} by key sha256:{signer.key_sha256[:16]}")
    return 0
