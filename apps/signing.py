"""``l3p keygen``, ``l3p sign`` and ``l3p rollback``: the training side's key pair and bundle
signatures, and a server host's deliberate rollback (core/signing.py, serving/sequences.py; the
operator's flow is docs/guides/signing.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from l3p.core.errors import L3PError
from l3p.core.signing import generate_key_pair, load_private_key, public_key_of, sign_bundle, signing_time

MODEL_HELP = ("the model the servers serve it as: its directory in the repository (DIR/NAME/VERSION), or the "
              "--bundle directory's name; the signature is valid for that model only")


class RollbackArgumentError(L3PError):
    """``l3p rollback`` names no model it can roll back."""


def add_keygen_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, metavar="PREFIX",
                        help="writes PREFIX.key (the private key, mode 0600: keep it on the training side) "
                             "and PREFIX.pub (for the servers' --trusted-keys file); never overwrites")
    parser.add_argument("--name", help="the key's name in .pub and in what servers report (default: PREFIX's "
                                       "file name)")


def run_keygen(args: argparse.Namespace) -> int:
    private, public = generate_key_pair(args.out, args.name)
    print(f"private key {private} (keep it secret; l3p export --sign-key {private} --model NAME)\n"
          f"public key  {public} (append it to the servers' --trusted-keys file)")
    return 0


def add_sign_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", type=Path, help="the bundle directory to sign (its manifest is checked first)")
    parser.add_argument("--key", type=Path, required=True, metavar="KEY",
                        help="the Ed25519 private key (from l3p keygen)")
    parser.add_argument("--model", required=True, metavar="NAME", help=MODEL_HELP)


def run_sign(args: argparse.Namespace) -> int:
    key = load_private_key(args.key, "--key")
    signature = sign_bundle(args.bundle, key, args.model)
    signer = public_key_of(key, args.key.stem)
    print(f"signed {args.bundle} for model {args.model}: signature.json by key sha256:{signer.key_sha256[:16]}, "
          f"{signature.describe()}")
    return 0


def add_rollback_arguments(parser: argparse.ArgumentParser) -> None:
    served = parser.add_mutually_exclusive_group(required=True)
    served.add_argument("--models", type=Path, metavar="DIR", help="the server's model repository (l3p serve --models)")
    served.add_argument("--bundle", type=Path, metavar="DIR", help="the server's bundle (l3p serve --bundle)")
    parser.add_argument("model", nargs="?", metavar="NAME", help="with --models: the model to roll back")
    parser.add_argument("--trusted-keys", type=Path, required=True, metavar="FILE",
                        help="the server's --trusted-keys file: the version rolled back to must be signed by one "
                             "of its keys, for this model")
    parser.add_argument("--served-sequences", type=Path, metavar="FILE",
                        help="the server's --served-sequences file, when it gives one (default "
                             "$XDG_STATE_HOME/l3p/served-sequences.json); one that holds no mark for the model "
                             "is not the server's, and is refused")


def run_rollback(args: argparse.Namespace) -> int:
    """Sets the model's highest served sequence to that of the version the repository holds now
    (its newest), so the server serves it at its next look; run as the server's user."""
    from l3p.core.bundle_format import check_pin, read_manifest
    from l3p.core.signing import TrustedKeys, verify_bundle
    from l3p.serving.candidates import ModelSpec
    from l3p.serving.sequences import Mark, ServedSequences

    if (args.models is None) != (args.model is None):
        raise RollbackArgumentError("name the model to roll back with --models DIR NAME; --bundle DIR takes no NAME")
    trusted = TrustedKeys.load(args.trusted_keys)
    spec = ModelSpec(root=args.models, bundle=args.bundle)
    found = spec.sources()
    name = args.model or ModelSpec.bundle_name(args.bundle)
    candidate = found.get(name)
    if candidate is None or candidate.refusal:
        why = f": {candidate.refusal}" if candidate is not None else f" (models: {', '.join(found) or 'none'})"
        raise RollbackArgumentError(f"{args.models or args.bundle} holds no version of {name} to roll back to{why}")
    with candidate.open() as directory:
        digest = check_pin(directory.path, read_manifest(directory), None, shown=directory.where)
        signature = verify_bundle(directory, digest, trusted, model=name)
    store = ServedSequences(args.served_sequences)
    old = store.set(candidate.base, name, Mark(signature.sequence, candidate.version, digest))
    if old is None:  # the server keeps its marks elsewhere: lowering one here would change nothing
        raise RollbackArgumentError(
            f"{store.path} holds no served sequence for {name} of {args.models or args.bundle}: no server that "
            f"reads it has served a signed {name}, so there is nothing to lower (a server started with "
            "--served-sequences FILE keeps them there: give l3p rollback the same --served-sequences FILE)")
    was = f"{old.sequence} (signed {signing_time(old.sequence)}, version {old.version or '-'})"
    print(f"{candidate.label()}: the highest sequence served for {name} is now {signature.sequence} (signed "
          f"{signing_time(signature.sequence)}); it was {was}. The server loads {candidate.label()} at its next look "
          f"(the watch or ReloadModels) or start. Marks: {store.path}")
    return 0
