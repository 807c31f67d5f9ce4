"""Every raw exchange of the wire reference, sent as written to the Get started server.

docs/reference/wire.md shows each request as an ``http`` block titled by what it does, and
the server's answer in the block titled ``"<that title>: the answer"``. The requests go, in
page order, to hello.py (built from Get started's own code) over real HTTP; ``TASK_ID`` is
the id the last ``tools/call`` answered. Each answer must match the page: the HTTP status,
and the JSON-RPC messages with only the values that change between runs (ids, times,
``ttlMs``, ``pollIntervalMs``, the server's ``serverInfo``) read as their type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from markdown_blocks import REPO, Block, blocks, titled

from mcp_tasks.testing import running

if TYPE_CHECKING:
    from types import ModuleType

WIRE = REPO / "docs" / "reference" / "wire.md"
SERVING = REPO / "docs" / "serving-tasks.md"
ANSWER = ": the answer"
PLACEHOLDER = "TASK_ID"
#: Values that change from run to run: the page's value stands for any value of its type.
VARYING = {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
SERVER_INFO = "io.modelcontextprotocol/serverInfo"

pytestmark = pytest.mark.anyio


@dataclass
class Exchange:
    request: Block
    answer: Block


def exchanges() -> list[Exchange]:
    """The page's request blocks, each with its answer block."""
    http = blocks(WIRE, "http")
    answers = {block.title: block for block in http if block.title.endswith(ANSWER)}
    found = []
    for block in http:
        if block.title.endswith(ANSWER):
            continue
        assert block.title + ANSWER in answers, f"{block}: no block titled '{block.title}{ANSWER}'"
        found.append(Exchange(block, answers[block.title + ANSWER]))
    return found


def parse_request(text: str) -> tuple[str, dict[str, str], str]:
    """An HTTP request as the page writes it: the path, the headers and the body."""
    head, _, body = text.partition("\n\n")
    request_line, *header_lines = head.splitlines()
    method, path, _ = request_line.split()
    assert method == "POST"
    headers = dict(line.split(": ", 1) for line in header_lines)
    headers.pop("Host")
    return path, headers, body


def parse_answer(text: str) -> tuple[int, str, list[Any]]:
    """An HTTP answer as the page writes it: the status, the content type and its messages."""
    head, _, body = text.partition("\n\n")
    status_line, *header_lines = head.splitlines()
    headers = dict(line.split(": ", 1) for line in header_lines)
    content_type = headers["Content-Type"]
    if content_type == "text/event-stream":
        messages = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]
    else:
        messages = [json.loads(body)]
    return int(status_line.split()[1]), content_type, messages


def normalized(live: Any, page: Any) -> Any:
    """``live`` with each varying value replaced by the page's value of the same type, and
    the serverInfo the page leaves out dropped."""
    if isinstance(live, dict) and isinstance(page, dict):
        result = {}
        for key, item in live.items():
            value = item
            if key == "_meta" and isinstance(item, dict):
                value = {k: v for k, v in item.items() if k != SERVER_INFO}
                if not value and "_meta" not in page:
                    continue
            if key in VARYING and key in page and type(value) is type(page[key]):
                result[key] = page[key]
            else:
                result[key] = normalized(value, page.get(key))
        return result
    if isinstance(live, list) and isinstance(page, list):
        return [normalized(item, page[i] if i < len(page) else None) for i, item in enumerate(live)]
    return live


def is_subsequence(wanted: list[Any], live: list[Any]) -> bool:
    remaining = iter(live)
    return all(any(item == candidate for candidate in remaining) for item in wanted)


def counterpart(message: Any, page: list[Any]) -> Any:
    """The page's message of the same kind as a live one (method and status), else the first."""

    def kind(m: Any) -> tuple[Any, Any]:
        return m.get("method", "result"), m.get("params", {}).get("status")

    return next((candidate for candidate in page if kind(candidate) == kind(message)), page[0])


async def send(
    http: httpx.AsyncClient, url: str, exchange: Exchange, task_id: str
) -> tuple[int, list[Any]]:
    """Send the exchange's request as written (``TASK_ID`` replaced): the HTTP status and the
    JSON-RPC messages of the answer, in order."""
    path, headers, body = parse_request(exchange.request.text.replace(PLACEHOLDER, task_id))
    assert url.endswith(path)
    async with http.stream("POST", url, headers=headers, content=body) as response:
        if response.headers["content-type"].startswith("text/event-stream"):
            messages = [
                json.loads(line[6:])
                async for line in response.aiter_lines()
                if line.startswith("data: ")
            ]
        else:
            messages = [json.loads(await response.aread())]
        return response.status_code, messages


def as_on_the_page(messages: list[Any], task_id: str) -> list[Any]:
    """The messages with the task id written as the page's placeholder, wherever it appears."""
    return json.loads(json.dumps(messages).replace(json.dumps(task_id), json.dumps(PLACEHOLDER)))


async def test_every_exchange_of_the_wire_page_is_what_the_server_answers(
    hello: ModuleType,
) -> None:
    """Each request of docs/reference/wire.md gets, from a live server, the answer the page
    shows (a stream: the page's messages in order, progress notifications between them)."""
    found = exchanges()
    assert len(found) >= 10
    task_id = PLACEHOLDER
    async with running(hello.mcp) as url, httpx.AsyncClient(timeout=30) as http:
        for exchange in found:
            with anyio.fail_after(30):
                status, raw = await send(http, url, exchange, task_id)
            result = raw[0].get("result", {}) if len(raw) == 1 else {}
            if result.get("resultType") == "task":
                task_id = result["taskId"]
            page_status, content_type, page = parse_answer(exchange.answer.text)
            live = as_on_the_page(raw, task_id)
            assert status == page_status, f"{exchange.request}: HTTP {status}, {live}"
            if content_type == "text/event-stream":
                live = [normalized(message, counterpart(message, page)) for message in live]
                assert live[0] == page[0], f"{exchange.request}: {live}"
                assert live[-1] == page[-1], f"{exchange.request}: {live}"
                assert is_subsequence(page, live), f"{exchange.request}: {live}"
            else:
                assert len(live) == 1
                assert normalized(live[0], page[0]) == page[0], f"{exchange.request}: {live[0]}"


async def test_the_listen_request_of_serving_tasks_is_acknowledged(hello: ModuleType) -> None:
    """The raw `subscriptions/listen` request of docs/serving-tasks.md, sent as written for a
    task of the server, is acknowledged with that task and streams it to its end."""
    create = exchanges()[0]
    listen = Exchange(titled(SERVING, "subscriptions/listen"), create.answer)
    async with running(hello.mcp) as url, httpx.AsyncClient(timeout=30) as http:
        _, created = await send(http, url, create, PLACEHOLDER)
        task_id = created[0]["result"]["taskId"]
        with anyio.fail_after(30):
            status, messages = await send(http, url, listen, task_id)
    assert status == 200, messages
    acknowledged = messages[0]
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    assert acknowledged["params"]["notifications"] == {"taskIds": [task_id]}
    assert messages[-2]["params"]["status"] == "completed"
    assert messages[-1]["result"]["resultType"] == "complete"


async def test_the_curl_listen_of_the_wire_page_streams_the_task_to_its_end(
    hello: ModuleType,
) -> None:
    """The page's curl command, run as written with a real task id in place of TASK_ID (as
    the page says) and the live server's URL: it prints the acknowledgment, the task's
    notifications and the listen's `complete` result."""
    (curl,) = [block for block in blocks(WIRE, "bash") if block.text.startswith("curl ")]
    create = exchanges()[0]
    async with running(hello.mcp) as url, httpx.AsyncClient(timeout=30) as http:
        _, created = await send(http, url, create, PLACEHOLDER)
        task_id = created[0]["result"]["taskId"]
        command = curl.text.replace("http://127.0.0.1:8000/mcp", url).replace(PLACEHOLDER, task_id)
        with anyio.fail_after(60):
            done = await anyio.run_process(["bash", "-c", command], check=False)
    assert done.returncode == 0, done.stderr
    messages = [
        json.loads(line[6:])
        for line in done.stdout.decode().splitlines()
        if line.startswith("data: ")
    ]
    assert messages[0]["method"] == "notifications/subscriptions/acknowledged"
    assert messages[0]["params"]["notifications"] == {"taskIds": [task_id]}
    assert messages[-2]["params"]["status"] == "completed"
    assert messages[-1]["result"]["resultType"] == "complete"
