"""Claims on the MongoDB store: a claim by id is one guarded update
(:func:`mcp_tasks_mongodb.pipelines.claim`); a claim without an id walks the ready lane in
claim order and claims by id until one is eligible."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pymongo import ReturnDocument

from mcp_tasks_mongodb import pipelines
from mcp_tasks_mongodb.driver import driver_call

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection

    from mcp_tasks_mongodb.codec import Document

__all__ = ["claim_by_id", "claim_next", "promote"]

#: How many ready tasks a claim without an id reads at a time.
PAGE = 16


async def claim_by_id(
    tasks: AsyncCollection[Document],
    task_id: str,
    claim: list[Document],
    version: str,
    work_types: frozenset[str] | None = None,
) -> Document | None:
    """The task claimed by the guarded pipeline ``claim`` (which writes ``version``), or
    None when it was not eligible (then the update wrote nothing new: the guard kept every
    field) or not of ``work_types`` (then nothing matched)."""
    selected: Document = {"_id": task_id}
    if work_types is not None:
        selected["work_type"] = {"$in": sorted(work_types)}
    with driver_call():
        document = await tasks.find_one_and_update(
            selected, claim, return_document=ReturnDocument.AFTER
        )
    return document if document is not None and document["v"] == version else None


async def claim_next(
    tasks: AsyncCollection[Document],
    claim: list[Document],
    version: str,
    now: int,
    work_types: frozenset[str] | None = None,
) -> Document | None:
    """The oldest eligible task (rules.claim_order) of ``work_types`` (``None``: any),
    claimed: the tasks due at ``now`` (the server's) join the ready lane, then the ready
    lane of those types is read in claim order, a page of ids at a time (only the index's
    fields), and each is claimed by id until one is eligible. Reading ids first keeps the
    claim itself a single-document update by _id."""
    await promote(tasks, now)
    after: Document | None = None
    while True:
        page, sort, index = pipelines.claim_order(after, work_types)
        with driver_call():
            found = tasks.find(page, {"_id": 1, "created_at": 1}, sort=sort, hint=index, limit=PAGE)
            candidates = await found.to_list()
        for candidate in candidates:
            document = await claim_by_id(tasks, candidate["_id"], claim, version)
            if document is not None:
                return document
        if len(candidates) < PAGE:
            return None
        after = candidates[-1]


async def promote(tasks: AsyncCollection[Document], now: int) -> None:
    """Move the waiting tasks whose time has come at ``now`` (a claim ran out, a retry is
    due: :func:`~mcp_tasks_mongodb.pipelines.due`) to the ready lane."""
    due = pipelines.due(now)
    with driver_call():
        if await tasks.find_one(due, {"_id": 1}) is not None:  # mostly none: a read
            await tasks.update_many(due, pipelines.promoted())
