"""`mcp-tasks rekey --store URL` and `mcp-tasks keygen`: encryption keys at rest."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import anyio

from mcp_tasks.cli._errors import UsageError
from mcp_tasks.cli._stores import using_store
from mcp_tasks.cli.admin import positive_int
from mcp_tasks.domain.errors import InvalidArgument
from mcp_tasks.stores.abilities import Rewrites
from mcp_tasks.stores.encrypted import KEYS_ENV, Keyring, new_key
from mcp_tasks.stores.opening import describe_store
from mcp_tasks.stores.rekey import RekeyProgress, rekey

REKEY = "re-seal every task of a store under the first encryption key, in batches"
KEYGEN = "print a new encryption key (KID:KEY) for MCP_TASKS_ENCRYPTION_KEYS"

REKEY_DESCRIPTION = f"""{REKEY}.

The keys are $MCP_TASKS_ENCRYPTION_KEYS, or the file --encryption-keys-file names (KID:KEY
or KEY, one per line or comma-separated): the first seals, every one opens. A task holding
anything not sealed under the first key (sealed under an older one, or written before
encryption was on) is re-sealed; the others are read and left. Safe beside running
servers: each task is rewritten with a compare-and-set, so a write that comes between is
never lost (the task is read and re-sealed again). Interrupted, run it again: what is done
is not written twice. Rotate a key: put the new key first on every server (restart them),
run rekey, then drop the old key."""


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "rekey",
        help=REKEY,
        description=REKEY_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        help="store URL (default: $MCP_TASKS_STORE_URL or sqlite:///./mcp-tasks.db)",
    )
    parser.add_argument(
        "--encryption-keys-file",
        metavar="FILE",
        help=f"the keys (default: ${KEYS_ENV})",
    )
    parser.add_argument(
        "--batch",
        type=positive_int,
        default=100,
        metavar="N",
        help="tasks per batch, N ≥ 1 (default 100); progress is printed after each",
    )
    parser.add_argument(
        "--pause-ms",
        type=int,
        default=0,
        metavar="MS",
        help="pause between batches, to leave the store to the servers (default 0)",
    )
    parser.set_defaults(handler=run_rekey)
    keygen = commands.add_parser("keygen", help=KEYGEN, description=KEYGEN)
    keygen.add_argument("--id", default=None, metavar="KID", help="the key id (default: derived)")
    keygen.set_defaults(handler=run_keygen)


def keys_of(path: str | None) -> Keyring:
    """The keys of ``--encryption-keys-file``, else of ``$MCP_TASKS_ENCRYPTION_KEYS``.

    Raises:
        UsageError: none given, or not keys (the message never holds a key).
    """
    try:
        text = Path(path).read_text() if path is not None else os.environ.get(KEYS_ENV, "")
    except OSError as exc:
        raise UsageError(f"--encryption-keys-file: cannot read {path}: {exc.strerror}") from None
    if not text.strip():
        raise UsageError(f"no encryption keys: set ${KEYS_ENV} or --encryption-keys-file")
    try:
        return Keyring.parse(text)
    except InvalidArgument as exc:
        raise UsageError(f"encryption keys: {exc}") from None


def run_rekey(args: argparse.Namespace) -> int:
    keys = keys_of(args.encryption_keys_file)

    def report(progress: RekeyProgress) -> None:
        print(f"read {progress.read}, re-sealed {progress.resealed}", file=sys.stderr)

    async def run() -> int:
        async with using_store(args.store) as store:
            name = describe_store(store)
            if not isinstance(store, Rewrites):
                raise UsageError(f"{name}: this store offers no rewrite_after(); cannot rekey")
            done = await rekey(
                store, keys, batch=args.batch, pause_s=args.pause_ms / 1000, on_batch=report
            )
        print(
            f"{name}: {done.read} task{'s' if done.read != 1 else ''} read, "
            f"{done.resealed} re-sealed under key {keys.sealing_key_id}"
        )
        return 0

    return anyio.run(run)


def run_keygen(args: argparse.Namespace) -> int:
    key = new_key()
    if args.id is None:
        from mcp_tasks.stores.encrypted import EncryptionKey  # noqa: PLC0415

        print(f"{EncryptionKey.parse(key).key_id}:{key}")
    else:
        try:
            Keyring.parse(f"{args.id}:{key}")
        except InvalidArgument as exc:
            raise UsageError(f"--id: {exc}") from None
        print(f"{args.id}:{key}")
    return 0
