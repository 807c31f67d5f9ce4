"""Encryption at rest for any Store: a task's user data is sealed before the store sees it.

:class:`EncryptedStore` wraps a Store (any: ours or a third party's, unchanged) and seals,
with AES-256-GCM, what a task carries of its users' data: the work's input (a tool's
arguments), the status message, the input requests (all but their ``method``), the
answers, the result, and the error's message and data. What a store selects on stays as
it is (ids, owner, status, times, TTLs, the claim, the tool name a claim filters by), so
claims, caps and reaping work unchanged. The task id and the owner are the associated
data of every ciphertext: one moved to another task, or a row given another owner, no
longer opens (:class:`~mcp_tasks.domain.errors.DecryptionFailed`).

A sealed value is a string, ``mcpt:enc1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>``;
where the record needs an object (a result, an input request's ``params``) it is the
object ``{"mcpt:enc1": "<key id>:<…>"}``. A value that is not sealed is returned as it
is, so tasks written before encryption was turned on stay readable.

The nonce is synthetic (an HMAC of the associated data and the plaintext under a key of
its own, as in SIV): sealing is deterministic, so the store's own digests and
fingerprints of what it is given (a replayed worker write, an input key asked again) keep
matching; what that reveals is only whether two sealed values of one task are equal.

Several keys: the first seals, every one opens (:class:`Keyring`); ``mcp-tasks rekey``
re-seals a store under the first.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from mcp_tasks.domain.errors import (
    DecryptionFailed,
    InvalidArgument,
    NotJSONSafe,
    UnknownEncryptionKey,
)
from mcp_tasks.domain.jsonsafe import dumps, ensure_json, loads
from mcp_tasks.domain.models import (
    Claimed,
    Complete,
    Fail,
    NewTask,
    Progress,
    RequireInput,
    Retry,
    RevisionConflict,
    StatusChange,
    TaskRecord,
    Transition,
    WorkSpec,
    input_digest,
)
from mcp_tasks.domain.rules import ANY_OWNER

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from mcp_tasks.domain.jsonsafe import JSONObject, JSONValue
    from mcp_tasks.domain.models import Lease
    from mcp_tasks.domain.rules import OwnerArg, WorkTypes
    from mcp_tasks.stores.protocol import Store

__all__ = [
    "KEYS_ENV",
    "EncryptedStore",
    "EncryptionKey",
    "Keyring",
    "encrypting",
    "keyring_from",
    "new_key",
]

#: The environment variable ``Tasks`` and the CLI read the keys from (:meth:`Keyring.parse`).
KEYS_ENV: Final = "MCP_TASKS_ENCRYPTION_KEYS"

#: The prefix of a sealed string, and the one key of a sealed object.
SEALED: Final = "mcpt:enc1:"
SEALED_KEY: Final = "mcpt:enc1"

#: How many opened values a :class:`Keyring` keeps (what ``tasks/get`` polls read again).
OPENED_KEPT: Final = 4096

_KEY_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,32}")
_KEY_BYTES: Final = 32
_NONCE_BYTES: Final = 12


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def new_key() -> str:
    """A fresh key as the keys are written: 32 random bytes, base64url without padding."""
    return _b64encode(os.urandom(_KEY_BYTES))


@dataclass(frozen=True)
class EncryptionKey:
    """One AES-256 key and its id (the id is stored with every value it seals; the key never
    is). ``repr`` shows the id only."""

    key_id: str
    secret: bytes

    def __post_init__(self) -> None:
        if not _KEY_ID.fullmatch(self.key_id):
            raise InvalidArgument("an encryption key id is 1 to 32 letters, digits, '_' or '-'")
        if len(self.secret) != _KEY_BYTES:
            raise InvalidArgument("an encryption key is 32 bytes (base64url: 43 characters)")

    def __repr__(self) -> str:
        return f"EncryptionKey(key_id={self.key_id!r})"

    @classmethod
    def parse(cls, text: str) -> EncryptionKey:
        """``KID:KEY`` or ``KEY`` (its id then derived from it: ``k`` and 8 hex digits of a
        hash), ``KEY`` being 32 bytes in base64url (``mcp-tasks keygen``).

        Raises:
            InvalidArgument: not a key (the message never holds the text).
        """
        text = text.strip()
        key_id, _, encoded = text.rpartition(":")
        try:
            secret = _b64decode(encoded)
        except (binascii.Error, ValueError):
            raise InvalidArgument("an encryption key must be base64url (43 characters)") from None
        if not key_id:
            key_id = "k" + hashlib.sha256(b"mcp-tasks key id\x00" + secret).hexdigest()[:8]
        return cls(key_id, secret)


class _Cipher:
    """AES-256-GCM with a synthetic nonce, under subkeys of one key."""

    __slots__ = ("_aead", "_nonce_key", "key_id")

    def __init__(self, key: EncryptionKey) -> None:
        # Imported here: only a process with keys configured pays for loading it.
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: PLC0415

        self.key_id = key.key_id

        def derive(label: bytes) -> bytes:
            return hmac.digest(key.secret, label, "sha256")

        self._aead = AESGCM(derive(b"mcp-tasks aes-gcm key"))
        self._nonce_key = derive(b"mcp-tasks nonce key")

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        nonce = hmac.digest(self._nonce_key, aad + b"\x00" + plaintext, "sha256")[:_NONCE_BYTES]
        return nonce + self._aead.encrypt(nonce, plaintext, aad)

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag  # noqa: PLC0415

        try:
            return self._aead.decrypt(sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:], aad)
        except (InvalidTag, ValueError):
            raise DecryptionFailed(self.key_id) from None


def _aad(task_id: str, owner: str | None) -> bytes:
    """The associated data of every value of one task: its id and its owner."""
    return json.dumps(["mcp-tasks task", task_id, owner]).encode()


class Keyring:
    """The configured keys: the first seals, every one opens.

    Raises (constructor):
        InvalidArgument: no key, or two keys with one id.
    """

    def __init__(self, keys: Iterable[EncryptionKey]) -> None:
        #: The keys, the sealing one first.
        self.keys = tuple(keys)
        ciphers = [_Cipher(key) for key in self.keys]
        if not ciphers:
            raise InvalidArgument("at least one encryption key is needed")
        ids = [c.key_id for c in ciphers]
        if len(set(ids)) != len(ids):
            raise InvalidArgument("two encryption keys have the same id")
        self._sealing = ciphers[0]
        self._ciphers = {c.key_id: c for c in ciphers}
        # A poll reads the same sealed values again and again: each opened once. Keyed by
        # the task and owner too, so a value moved to another task is still refused.
        self._opened = functools.lru_cache(maxsize=OPENED_KEPT)(self._open)

    def __repr__(self) -> str:
        return f"Keyring(key_ids={list(self._ciphers)!r})"

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of the keys, the sealing one first."""
        return tuple(self._ciphers)

    @property
    def sealing_key_id(self) -> str:
        return self._sealing.key_id

    @classmethod
    def parse(cls, text: str) -> Keyring:
        """Keys separated by commas or whitespace, each ``KID:KEY`` or ``KEY``
        (:meth:`EncryptionKey.parse`), the sealing key first."""
        return cls(EncryptionKey.parse(part) for part in re.split(r"[,\s]+", text) if part)

    def seal(self, value: JSONValue, task_id: str, owner: str | None) -> str:
        """``value`` sealed for this task, under the first key."""
        sealed = self._sealing.seal(dumps(value).encode(), _aad(task_id, owner))
        return f"{SEALED}{self._sealing.key_id}:{_b64encode(sealed)}"

    def open(self, text: str, task_id: str, owner: str | None) -> JSONValue:
        """The value :meth:`seal` sealed in ``text`` (the same object for the same
        arguments while it is among the last :data:`OPENED_KEPT` opened: never change it).

        Raises:
            UnknownEncryptionKey: sealed under a key that is not configured.
            DecryptionFailed: it does not authenticate for this task and owner.
        """
        opened: JSONValue = self._opened(text, task_id, owner)
        return opened

    def _open(self, text: str, task_id: str, owner: str | None) -> JSONValue:
        key_id, _, encoded = text[len(SEALED) :].partition(":")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise UnknownEncryptionKey(key_id)
        try:
            sealed = _b64decode(encoded)
        except (binascii.Error, ValueError):
            raise DecryptionFailed(key_id) from None
        value: JSONValue = loads(cipher.open(sealed, _aad(task_id, owner)))
        return value


def keyring_from(
    keys: Keyring | str | Iterable[str] | None, *, environ: bool = True
) -> Keyring | None:
    """The keyring ``keys`` names: a :class:`Keyring`, a string of keys (:meth:`Keyring.parse`),
    or one string per key; ``None``: ``$MCP_TASKS_ENCRYPTION_KEYS`` when ``environ`` and set,
    else no encryption."""
    if keys is None:
        text = os.environ.get(KEYS_ENV, "") if environ else ""
        return Keyring.parse(text) if text.strip() else None
    if isinstance(keys, Keyring):
        return keys
    if isinstance(keys, str):
        return Keyring.parse(keys)
    return Keyring(EncryptionKey.parse(key) for key in keys)


def is_sealed(value: object) -> bool:
    """Whether ``value`` is a sealed string."""
    return isinstance(value, str) and value.startswith(SEALED)


def _sealed_object(value: object) -> str | None:
    """The sealed string of a sealed object (``{"mcpt:enc1": …}``), else ``None``."""
    if isinstance(value, dict) and len(value) == 1:
        inner = value.get(SEALED_KEY)
        if isinstance(inner, str):
            return SEALED + inner
    return None


class TaskSeal:
    """Sealing and opening the parts of one task (its id and owner are the associated data)."""

    __slots__ = ("_keys", "owner", "task_id")

    def __init__(self, keys: Keyring, task_id: str, owner: str | None) -> None:
        self._keys = keys
        self.task_id = task_id
        self.owner = owner

    def seal(self, value: JSONValue) -> str:
        return self._keys.seal(value, self.task_id, self.owner)

    def seal_object(self, value: JSONValue) -> JSONObject:
        return {SEALED_KEY: self.seal(value)[len(SEALED) :]}

    def open(self, value: JSONValue) -> JSONValue:
        """``value`` opened when sealed (a string or an object), else as it is."""
        if is_sealed(value):
            return self._keys.open(value, self.task_id, self.owner)  # type: ignore[arg-type]
        inner = _sealed_object(value)
        if inner is not None:
            return self._keys.open(inner, self.task_id, self.owner)
        return value

    # --- the parts of a task ---------------------------------------------------------

    def seal_text(self, text: str | None) -> str | None:
        return None if text is None else self.seal(text)

    def open_text(self, text: str | None) -> str | None:
        return None if text is None else str(self.open(text))

    def seal_work(self, work: WorkSpec | None) -> WorkSpec | None:
        if work is None or is_sealed(work.input):
            return work
        return replace(work, input=self.seal(work.input))

    def open_work(self, work: WorkSpec | None) -> WorkSpec | None:
        if work is None or not is_sealed(work.input):
            return work
        opened = object.__new__(WorkSpec)
        for name in WorkSpec.__slots__:
            object.__setattr__(opened, name, getattr(work, name))
        object.__setattr__(opened, "input", self.open(work.input))
        return opened

    def seal_request(self, request: Mapping[str, JSONValue]) -> JSONObject:
        """An input request with everything but its ``method`` sealed as its ``params``."""
        rest = {k: v for k, v in request.items() if k != "method"}
        return {"method": request.get("method"), "params": self.seal_object(rest)}

    def open_request(self, request: Mapping[str, JSONValue]) -> JSONObject:
        inner = _sealed_object(request.get("params"))
        if inner is None:
            return dict(request)
        rest = self._keys.open(inner, self.task_id, self.owner)
        assert isinstance(rest, dict)
        return {"method": request.get("method"), **rest}

    def seal_error(self, error: Mapping[str, JSONValue]) -> JSONObject:
        """An error with its ``message`` and ``data`` sealed; its ``code`` stays."""
        sealed: JSONObject = dict(error)
        sealed["message"] = self.seal(error["message"])
        if "data" in error:
            sealed["data"] = self.seal(error["data"])
        return sealed

    def open_error(self, error: JSONObject | None) -> JSONObject | None:
        if error is None or not is_sealed(error.get("message")):
            return error
        opened: JSONObject = dict(error)
        opened["message"] = self.open(error["message"])
        if "data" in error:
            opened["data"] = self.open(error["data"])
        return opened

    def seal_change(self, change: StatusChange) -> StatusChange:
        text = self.seal_text(change.status_message)
        match change:
            case Progress():
                return Progress(self.seal(change.status_message))
            case RequireInput(requests=requests):
                sealed = {k: self.seal_request(r) for k, r in requests.items()}
                return RequireInput(sealed, text)
            case Complete(result=result):
                return Complete(self.seal_object(result), text)
            case Fail(error=error):
                return Fail(self.seal_error(error), text)
            case Retry(error=error):
                return Retry(self.seal_error(error), text)

    def seal_answer(self, answer: JSONValue, asked: str | None) -> str:
        """An answer, sealed with the digest of the (plain) request it answers: the store
        keeps only the digest of the sealed request, and a body that asks the key again
        compares its plain request's digest (``TaskRecord.asked_inputs``)."""
        return self.seal({"answer": answer, "asked": asked})

    def open_record(self, record: TaskRecord) -> TaskRecord:
        """``record`` with every sealed part opened (itself when nothing is sealed)."""
        changes: dict[str, Any] = {}
        message = record.status_message
        if is_sealed(message):
            changes["status_message"] = self.open_text(message)
        work = self.open_work(record.work)
        if work is not record.work:
            changes["work"] = work
        if record.result is not None and _sealed_object(record.result) is not None:
            changes["result"] = self.open(record.result)
        error = self.open_error(record.error)
        if error is not record.error:
            changes["error"] = error
        if record.input_requests or record.input_responses:
            changes.update(self._open_inputs(record))
        if not changes:
            return record
        opened = object.__new__(TaskRecord)
        for name in TaskRecord.__slots__:
            object.__setattr__(opened, name, changes.get(name, getattr(record, name)))
        return opened

    def _open_inputs(self, record: TaskRecord) -> dict[str, Any]:
        """The input requests, answers and asked digests opened: the digest of a sealed
        request is the plain request's (outstanding: from the request itself; answered:
        the one sealed with its answer)."""
        requests = {k: self.open_request(r) for k, r in record.input_requests.items()}
        asked = dict(record.asked_inputs)
        answers: dict[str, JSONValue] = {}
        for key, answer in record.input_responses.items():
            if is_sealed(answer):
                opened = self.open(answer)
                assert isinstance(opened, dict)
                answers[key] = opened.get("answer")
                digest = opened.get("asked")
                if isinstance(digest, str) and key in asked:
                    asked[key] = digest
            else:
                answers[key] = answer
        for key, request in record.input_requests.items():
            if key in asked and _sealed_object(request.get("params")) is not None:
                asked[key] = input_digest(requests[key])
        return {"input_requests": requests, "input_responses": answers, "asked_inputs": asked}


#: How many task owners an :class:`EncryptedStore` remembers (a worker's write names no
#: owner, and the owner is part of every ciphertext); a task it forgot costs one ``get``.
OWNERS_KEPT: Final = 4096


class EncryptedStore:
    """A :class:`~mcp_tasks.stores.protocol.Store` that seals a task's user data before the
    store it wraps (:attr:`inner`) sees it, and opens it on the way back.

    It offers the ten operations only: what else the store offers
    (:mod:`mcp_tasks.stores.abilities`) is asked of :attr:`inner`
    (:func:`~mcp_tasks.stores.observed.unobserved` unwraps both). ``update`` reads the task
    first (its owner and its outstanding requests); a worker's ``put_status`` reads it only
    when the task's owner is not remembered from an earlier answer of this handle.
    """

    def __init__(self, inner: Store, keyring: Keyring) -> None:
        self.inner = inner
        self.keyring = keyring
        self._owners: OrderedDict[str, str | None] = OrderedDict()

    def __repr__(self) -> str:
        return repr(self.inner)

    def _seal_for(self, task_id: str, owner: str | None) -> TaskSeal:
        """The task's seal; its owner remembered (``owner`` is always one the store
        answered: a create the store refused, say a duplicate id, teaches nothing)."""
        owners = self._owners
        owners[task_id] = owner
        owners.move_to_end(task_id)
        if len(owners) > OWNERS_KEPT:
            owners.popitem(last=False)
        return TaskSeal(self.keyring, task_id, owner)

    def _opened(self, record: TaskRecord) -> TaskRecord:
        return self._seal_for(record.task_id, record.owner).open_record(record)

    def _opened_transition(self, transition: Transition) -> Transition:
        return replace(transition, record=self._opened(transition.record))

    async def create(self, task: NewTask) -> TaskRecord:
        seal = TaskSeal(self.keyring, task.task_id, task.owner)
        sealed = replace(
            task, work=seal.seal_work(task.work), status_message=seal.seal_text(task.status_message)
        )
        return self._opened(await self.inner.create(sealed))

    async def get(self, task_id: str, owner: OwnerArg) -> TaskRecord:
        return self._opened(await self.inner.get(task_id, owner))

    async def update(
        self, task_id: str, owner: OwnerArg, input_responses: Mapping[str, object]
    ) -> Transition:
        current = self._opened(await self.inner.get(task_id, owner))
        seal = self._seal_for(task_id, current.owner)
        outstanding = current.input_requests
        sealed: dict[str, object] = {}
        for key, answer in input_responses.items():
            try:
                value = ensure_json(answer, "input response")
            except NotJSONSafe:  # the store refuses it, or ignores it (not outstanding)
                sealed[key] = answer
                continue
            asked = input_digest(outstanding[key]) if key in outstanding else None
            sealed[key] = seal.seal_answer(value, asked)
        return self._opened_transition(await self.inner.update(task_id, owner, sealed))

    async def cancel(self, task_id: str, owner: OwnerArg) -> Transition:
        return self._opened_transition(await self.inner.cancel(task_id, owner))

    async def _owner_of(self, task_id: str) -> str | None:
        if task_id in self._owners:
            return self._owners[task_id]
        return (await self.inner.get(task_id, ANY_OWNER)).owner

    async def put_status(
        self,
        task_id: str,
        change: StatusChange,
        *,
        lease: Lease | None = None,
        expected_revision: int | None = None,
        event_id: str | None = None,
    ) -> Transition:
        seal = self._seal_for(task_id, await self._owner_of(task_id))
        try:
            transition = await self.inner.put_status(
                task_id,
                seal.seal_change(change),
                lease=lease,
                expected_revision=expected_revision,
                event_id=event_id,
            )
        except RevisionConflict as conflict:
            raise RevisionConflict(self._opened(conflict.current), str(conflict)) from None
        return self._opened_transition(transition)

    async def claim(
        self,
        worker_id: str,
        *,
        lease_ms: int,
        task_id: str | None = None,
        work_types: WorkTypes = None,
    ) -> Claimed | None:
        claimed = await self.inner.claim(
            worker_id, lease_ms=lease_ms, task_id=task_id, work_types=work_types
        )
        return None if claimed is None else replace(claimed, record=self._opened(claimed.record))

    async def renew(self, lease: Lease, *, lease_ms: int) -> Lease:
        return await self.inner.renew(lease, lease_ms=lease_ms)

    async def release(self, lease: Lease) -> None:
        await self.inner.release(lease)

    async def reap(self, *, limit: int = 500) -> int:
        return await self.inner.reap(limit=limit)

    async def close(self) -> None:
        await self.inner.close()


def encrypting(store: Store, keys: Keyring | None) -> Store:
    """``store`` sealing under ``keys`` (an :class:`EncryptedStore`); itself without keys."""
    if keys is None:
        return store
    if isinstance(store, EncryptedStore):
        return store if store.keyring is keys else EncryptedStore(store.inner, keys)
    return EncryptedStore(store, keys)


def reseal(record: TaskRecord, keys: Keyring) -> TaskRecord:
    """``record`` (as the store holds it) with every part sealed under the first key of
    ``keys``, whatever it was sealed under before, or not at all: what ``mcp-tasks rekey``
    writes. ``asked_inputs`` of the outstanding requests follow their new sealed form."""
    seal = TaskSeal(keys, record.task_id, record.owner)
    opened = seal.open_record(record)
    requests = {k: seal.seal_request(r) for k, r in opened.input_requests.items()}
    asked = dict(record.asked_inputs)
    for key, request in requests.items():
        asked[key] = input_digest(request)
    answers: dict[str, JSONValue] = {}
    for key, answer in opened.input_responses.items():
        answers[key] = seal.seal_answer(answer, opened.asked_inputs.get(key))
    error = opened.error
    return replace(
        record,
        status_message=seal.seal_text(opened.status_message),
        input_requests=requests,
        input_responses=answers,
        asked_inputs=asked,
        result=None if opened.result is None else seal.seal_object(opened.result),
        error=None if error is None else seal.seal_error(error),
        work=seal.seal_work(opened.work),
    )


def sealed_under(record: TaskRecord) -> frozenset[str]:
    """The key ids ``record``'s sealed parts name; ``""`` for a part that is not sealed."""
    found: set[str] = set()

    def note(value: Any) -> None:
        text = value if is_sealed(value) else _sealed_object(value)
        if text is None:
            found.add("")
        else:
            found.add(text[len(SEALED) :].partition(":")[0])

    if record.work is not None:
        note(record.work.input)
    if record.status_message is not None:
        note(record.status_message)
    for request in record.input_requests.values():
        note(request.get("params"))
    for answer in record.input_responses.values():
        note(answer)
    if record.result is not None:
        note(record.result)
    if record.error is not None:
        note(record.error.get("message"))
    return frozenset(found)
