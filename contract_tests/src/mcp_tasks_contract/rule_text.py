# ruff: noqa: E501 - each rule's sentence is one line, as the doc states it
"""Each Store contract rule in the words of docs/store-contract.md (generated from the
doc by contract_tests/tests/meta/test_contract_doc.py, which checks they agree).
"""

from __future__ import annotations

from typing import Final

RULE_TEXT: Final[dict[str, str]] = {
    "S-CREATE.1": "Atomic insert at revision 0: In one atomic step: check that the id is new, check the caps (`S-CREATE.2`), insert the task together with its work descriptor.",
    "S-CREATE.2": "Row cap and per-owner cap: `StoreOptions.max_rows` (default 10 000; `None` = unlimited) bounds the rows that are **not expired** by the store's clock; expired rows do not count even before `reap` removes them.",
    "S-CREATE.3": "Visible everywhere once created: Once `create` returns, `get` on **any other handle** (another connection, process or node) finds the task, equal to the returned record.",
    "S-CREATE.4": "An existing id is refused: Creating an id that exists — in any status, including a task that expired but is not reaped yet — raises `DuplicateTaskId` and leaves the stored task exactly as it was.",
    "S-CREATE.5": "The creating request's client capabilities are kept: `NewTask.client_capabilities` (a JSON object, or `None` when not known) is stored with the task and comes back from `create` and from `get` on any handle exactly as given (`S-JSON`), and no later write — progress, input requests, answers, claims, renewals, the end — changes it.",
    "S-CREATE.6": "Created already claimed: A `NewTask` with `claimed_by` (a worker id) and `lease_ms` (both or neither; only for a task with `work`, else `InvalidArgument` when the `NewTask` is built) is inserted already claimed, in the same atomic step: generation 1, a fresh random token, `Claim(claimed_by, token, expires_at = created_at + lease_ms)`, and the task held at least until then (`S-TTL.1`) — exactly what `claim` by id right after the insert would write (`rules.new_record` applies `rules.apply_claim`), without the window between the two in which another worker's `claim` without an id could take it.",
    "S-GET.1": "Unknown, foreign and expired are one error: An unknown id, a task owned by someone else (including an anonymous caller, `owner=None`, reading an owned task) and an expired task all raise `TaskNotFound` with the **same message**, which never contains the id.",
    "S-GET.2": "Ownerless tasks and trusted readers: A task whose `owner` is `None` answers to every caller: any principal, `None` and `ANY_OWNER`.",
    "S-GET.3": "A pure read: `get` never changes the record: not the revision, not `last_updated_at`, nothing, however often and from however many handles it is called, found or not.",
    "S-UPDATE.1": "Owner- and expiry-bound: Exactly like `get` (`S-GET.1`, `S-GET.2`): unknown, foreign and expired tasks raise `TaskNotFound` and nothing is written; `ANY_OWNER` skips only the owner check.",
    "S-UPDATE.2": "Only outstanding keys count: If the task is not `input_required`, the outcome is `unchanged`.",
    "S-UPDATE.3": "Partial answers: When some outstanding keys are answered and others remain: the outcome is `applied` (revision + 1, `last_updated_at` later), the status stays `input_required`, the answered keys leave `input_requests` at once (the very next `get`, on any handle, shows only what is still outstanding) and their values join `input_responses`.",
    "S-UPDATE.4": "The last answer resumes the work: When the answer covers the last outstanding key: `applied`, `input_requests` becomes empty, the status becomes `working`, and `input_responses` keeps every answer ever accepted (later answers to already-answered keys are ignored by `S-UPDATE.2`), for the worker to read.",
    "S-UPDATE.5": "Atomic read-modify-write: `update` reads, decides and writes atomically: it never overwrites a change that happened in between.",
    "S-CANCEL.1": "Cancelled at once: A `working` or `input_required` task becomes `cancelled` in one applied write (revision + 1): outstanding `input_requests` are cleared, result and error stay empty, and a claim is **left in place** (same generation) for its worker to discover: the worker's next leased write answers `unchanged` with the cancelled record (`S-PUT.4`), and its next `renew` raises `StaleLease` (`S-RENEW`).",
    "S-CANCEL.2": "Terminal is unchanged; foreign, unknown, expired are missing: Cancelling a `completed`, `failed` or `cancelled` task is acknowledged, not an error: the outcome is `unchanged` with the current record and nothing is written.",
    "S-CANCEL.3": 'A cancelled task has no status message: The cancel also clears `status_message` (to `None`): the body\'s last progress ("Computing result") no longer describes a cancelled task.',
    "S-PUT.1": "The right to write: lease or no live claim: **With a lease**: the task must hold a **live** claim (its `expires_at` after the store's now), the claim's token must equal `lease.token`, and the task's `generation` must equal `lease.generation`; otherwise `StaleLease`.",
    "S-PUT.2": "Event ids make writes idempotent: With an `event_id`, the store compares the change's fingerprint (`rules.fingerprint`: a digest of the change's JSON body, kind and status message included) with the events the task recorded:",
    "S-PUT.3": "Compare-and-set on the revision: With `expected_revision`, the write applies only if the task's revision equals it; otherwise `RevisionConflict`, whose `current` attribute is the current record, and nothing is written.",
    "S-PUT.4": "Terminal tasks are final: A `completed`, `failed` or `cancelled` task never changes again.",
    "S-PUT.5": "Input requests: `RequireInput(requests)` is checked twice:",
    "S-PUT.6": "Retry: `Retry(error, status_message)` ends the current attempt:",
    "S-CLAIM.1": "Which task: A task is **eligible** when it is not terminal, has `work`, is not expired, its `retry_at` is `None` or due, and it holds no live claim (an expired claim counts as none) — `rules.claimable`.",
    "S-CLAIM.2": "A new claim: The claimed task gets `generation + 1`, a fresh random token, and a claim `Claim(worker_id, token, expires_at = now + lease_ms)`; `retry_at` is cleared.",
    "S-CLAIM.3": "One claim at a time: Under any concurrency, a task is claimed at most once per generation: 16 handles claiming one task by id at once give one winner and 15 `None`; 16 workers claiming without an id over 500 tasks claim each task exactly once, all at generation 1.",
    "S-CLAIM.4": "Only the work types asked for: With `work_types` (a set of work type names: the tools a runner can run), `claim` takes only a task whose `work.type` is one of them (`rules.of_work_types`), by id or not, and without an id the oldest eligible task **of those types**: the type is part of the selection, in the same single step (one statement, script or update), never a claim taken and given back.",
    "S-RENEW": "Extend a live lease: If the task exists, is not expired and not terminal, and `lease` is its live claim (`S-PUT.1`'s leased check), the claim now expires at the store's now + `lease_ms`; the returned lease has the same task id, token and generation and the new `expires_at`.",
    "S-RELEASE": "Give a claim back: If the task exists and its claim has `lease`'s token and the task is at `lease`'s generation, the claim is removed at once: the task is claimable again immediately, and the next claim gets generation + 1 (the generation is kept, never reset).",
    "S-TTL.1": "A live lease holds its task: `claim` and `renew` set `expires_at = max(expires_at, lease end)`.",
    "S-TTL.2": "A finished task stays readable for the result retention: A write that ends the task — `Complete`, `Fail`, a `Retry` with no delay left, a client's `cancel` — also sets `expires_at = max(expires_at, now + result_retention_ms)` (`StoreOptions.result_retention_ms`, default 60 000; 0 = off, the TTL alone decides), in the same atomic write.",
    "S-REAP": "Remove expired and long-finished tasks: `reap` deletes, and counts, up to `limit` tasks that are either",
    "S-CLOSE": "Closed means closed: `close` is idempotent: closing twice is fine (the suite closes every handle it opened, some of them twice).",
    "S-OPS": "Every operation, with the protocol's signature: The handle is an instance of the runtime-checkable `Store` protocol, and every name in `STORE_OPERATIONS` is an `async def` (a coroutine function, not a sync method returning an awaitable) whose parameters have the protocol's names, kinds (positional, keyword-only) and defaults, ignoring `self` (annotations may be spelled differently).",
    "S-NOLIST": "No enumeration: A store offers no way to list, scan or count tasks, nor to list owners or ids: no `tasks/list` exists on the wire (the engine answers it with `-32601`), and nothing on a Store may make ids discoverable.",
    "S-CALLER": "A caller's mistake is not a store failure: `claim` and `renew` with a non-positive `lease_ms` raise `ValueError` (the shared rules' `apply_claim` and `apply_renew` do), never `StoreUnavailable` — which would tell the runner that the backend is down — and write nothing: an eligible task stays unclaimed, a live claim stays exactly as it was and can still be renewed.",
    "S-DURABLE": "Nothing acknowledged is lost: After a handle is closed, a new handle on the same namespace finds every task exactly as it was acknowledged (all five statuses, payloads, owners, TTLs), a claim that was live is still valid (it can be renewed, at the same generation, and written with), and a recorded event id still replays as `duplicate`.",
    "S-JSON": "Exact round trip: Whatever JSON-safe value goes in comes out **exactly**, types included (`1`, `1.0` and `True` are three different values): as input request params, as a response, as a result, as an error's `data`, as a work descriptor's `input`, and (strings) as a status message, read back on another handle.",
    "INV-REVISION": "a task's `revision` equals the number of `applied` outcomes it has had",
    "INV-TERMINAL": "once terminal, a task never changes status, revision, result, error or status message again",
    "INV-CLAIM": "at most one live claim per task; generations strictly increase with each claim and never go back",
    "INV-FOREIGN": "to another principal or an anonymous caller, an owned task is indistinguishable from a missing one: same error, same message",
    "INV-EXPIRED": "an expired task, reaped or not, answers `get`, `update`, `cancel` and `put_status` exactly like a missing one (`TaskNotFound`, same message), is never claimed, cannot be renewed (`StaleLease`) and does not count toward the row cap; only its id stays taken until it is reaped (`S-CREATE.4`)",
    "INV-CAP": "stored, unexpired rows never exceed `max_rows`, even under concurrent creates, and one owner's active tasks never exceed `max_active_per_owner`",
    "INV-NOPARTIAL": "an operation that raises leaves the stored record exactly as it was",
    "INV-TIMES": "`created_at <= last_updated_at`, and `last_updated_at` strictly increases with each applied change",
}
