"""The simulator's batch APIs: OpenAI Batch (files + batches) and Anthropic Message Batches.

OpenAI: `POST /v1/files` (multipart, purpose `batch`), `GET /v1/files/{id}[/content]`,
`POST /v1/batches` (input_file_id, endpoint, completion_window "24h", metadata: at most
16 string pairs, keys of up to 64 and values of up to 512 characters), `GET
/v1/batches[/{id}]`, `POST /v1/batches/{id}/cancel`. The list is newest first, `limit`
1-100 (default 20) after the `after` cursor, with `first_id`/`last_id`/`has_more`, each
batch with its metadata (OpenAI API reference, "List batches":
https://platform.openai.com/docs/api-reference/batch/list). A batch goes validating ->
in_progress -> finalizing -> completed (or failed when its file does not validate:
`errors.data` with the line and code, as the real service reports them; expired; cancelled).
Results are two files, `output_file_id` (200 answers) and `error_file_id` (error answers
and requests not run), one JSON line per request with its `custom_id`.

Anthropic: `POST /v1/messages/batches` (`requests: [{custom_id, params}]`), `GET
/v1/messages/batches` (newest first; `limit` 1-1000, default 20; `after_id` /
`before_id` cursors; `first_id`/`last_id`/`has_more`: Anthropic API reference, "List
Message Batches", https://docs.anthropic.com/en/api/listing-message-batches), `GET /v1/messages/batches/{id}`, `GET .../results` (JSONL; `results_url` points there), `POST
.../cancel`. `processing_status` in_progress -> ended (canceling); `request_counts`;
results typed succeeded / errored / canceled / expired. Custom ids are checked as the
real API does (1-64 of `[a-zA-Z0-9_-]`, unique); so are the size limits (100,000
requests, 256 MB: 400 / 413).

Every request of a batch is answered by the same code as a live request (parse, context
check, answerer, prompt cache), so a batch answer equals the live one. `batch_turnaround_s`
sets how long a batch takes (seconds, so tests run quickly); `batch_hold_s` holds a call
at a stage of a submission (a client killed meanwhile leaves the state of a crash
there; a call whose client has gone is dropped, as a request never received); the first `batch_expire`
batches expire with half their requests done; `error_rate` makes that share of requests
fail with a server error (drawn per request and attempt, like live faults).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, web

from .formats import ROUTES, BadRequest, WireFormat

_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_OPENAI_ENDPOINTS = ("/v1/chat/completions", "/v1/completions")
_EXPIRED_MSG = "This request could not be executed before the completion window expired."


def _json(data: object, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(data, separators=(",", ":")).encode(), status=status,
                        content_type="application/json")


def _openai_error(status: int, message: str, code: str | None = None, param: str | None = None) -> web.Response:
    return _json({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}},
                 status)


def _anthropic_error(status: int, kind: str, message: str) -> web.Response:
    return _json({"type": "error", "error": {"type": kind, "message": message}}, status)


@dataclass
class SimFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def meta(self) -> dict[str, object]:
        return {"id": self.id, "object": "file", "bytes": len(self.data), "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed", "status_details": None}


@dataclass
class SimBatch:
    id: str
    api: str  # "openai" | "anthropic"
    endpoint: str
    requests: list[tuple[str, dict[str, Any]]]  # (custom_id, body)
    created_at: int
    expire: bool
    info: dict[str, Any] = field(default_factory=dict)  # OpenAI: the batch object's mutable fields
    results: list[dict[str, Any]] = field(default_factory=list)  # Anthropic result lines
    cancelled: bool = False
    task: asyncio.Task[None] | None = None


class BatchService:
    """Files and batches of one simulator; batches run as background tasks."""

    def __init__(self, server: Any) -> None:  # the SimServer (server.py imports this module)
        self.server = server
        self.files: dict[str, SimFile] = {}
        self.batches: dict[str, SimBatch] = {}
        self._n = 0

    def _id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n:024x}"

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        path, method = request.path.rstrip("/"), request.method
        parts = path.split("/")[1:]  # ["v1", ...]
        if parts[1] == "messages":
            return await self._anthropic_route(request, path, method, parts[3:])
        if parts[1] == "files":
            return await self._files(request, method, parts[2:])
        return await self._openai_route(request, path, method, parts[2:])

    async def _anthropic_route(self, request: web.BaseRequest, path: str, method: str,
                               rest: list[str]) -> web.StreamResponse:
        """/v1/messages/batches[/{id}[/results|/cancel]]."""
        try:
            self.server.check_anthropic_headers(request)
        except BadRequest as exc:
            return _anthropic_error(exc.status, exc.kind, str(exc))
        if method == "POST" and not rest:
            return await self._anthropic_create(request)
        if method == "GET" and not rest:
            return self._anthropic_list(request)
        batch = self.batches.get(rest[0]) if rest else None
        if batch is None or batch.api != "anthropic":
            return _anthropic_error(404, "not_found_error", f"batch {rest[0] if rest else ''} not found")
        if method == "GET" and len(rest) == 1:
            return _json(self._anthropic_object(batch, request))
        if method == "GET" and rest[1:] == ["results"]:
            return self._anthropic_results(batch)
        if method == "POST" and rest[1:] == ["cancel"]:
            if batch.info.get("processing_status") == "in_progress":
                batch.cancelled = True
                batch.info["processing_status"] = "canceling"
                batch.info["cancel_initiated_at"] = _iso(time.time())
            return _json(self._anthropic_object(batch, request))
        return _anthropic_error(404, "not_found_error", f"no route {method} {path}")

    @staticmethod
    def _anthropic_results(batch: SimBatch) -> web.Response:
        """The result lines, once the batch has ended (400 before, as the real API)."""
        if batch.info.get("processing_status") != "ended":
            return _anthropic_error(400, "invalid_request_error",
                                    f"Message Batch {batch.id} has not yet ended; results are not available")
        body = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in batch.results).encode()
        return web.Response(body=body, content_type="application/binary")

    async def _openai_route(self, request: web.BaseRequest, path: str, method: str,
                            rest: list[str]) -> web.StreamResponse:
        """/v1/batches[/{id}[/cancel]]."""
        if method == "POST" and not rest:
            return await self._openai_create(request)
        if method == "GET" and not rest:
            return self._openai_list(request)
        batch = self.batches.get(rest[0]) if rest else None
        if batch is None or batch.api != "openai":
            return _openai_error(404, f"No batch found with id '{rest[0] if rest else ''}'.")
        if method == "GET" and len(rest) == 1:
            return _json(self._openai_object(batch))
        if method == "POST" and rest[1:] == ["cancel"]:
            if batch.info["status"] in ("validating", "in_progress", "finalizing"):
                batch.cancelled = True
                batch.info["status"] = "cancelling"
                batch.info["cancelling_at"] = int(time.time())
            return _json(self._openai_object(batch))
        return _openai_error(404, f"no route {method} {path}")

    async def _hold(self, stage: str, request: web.BaseRequest) -> bool:
        """Wait at `stage` if the test asked; False when the client went away meanwhile
        (the call is then dropped, as a request the server never got)."""
        seconds = self.server.config.batch_hold_s.get(stage)
        if not seconds:
            return True
        self.server.stats.batch_holds += 1
        await asyncio.sleep(seconds)
        transport = request.transport
        return transport is not None and not transport.is_closing()

    def _page(self, api: str, request: web.BaseRequest, max_limit: int, after_key: str,
              before_key: str | None) -> tuple[list[SimBatch], bool] | web.Response:
        """A newest-first page of one API's batches after (or before) a cursor id."""
        error = _openai_error if api == "openai" else (lambda status, message: _anthropic_error(
            status, "invalid_request_error", message))
        try:
            limit = int(request.query.get("limit", "20"))
        except ValueError:
            return error(400, "limit must be an integer")
        if not 1 <= limit <= max_limit:
            return error(400, f"limit must be between 1 and {max_limit}")
        ordered = [b for b in self.batches.values() if b.api == api][::-1]
        ids = [b.id for b in ordered]
        after, before = request.query.get(after_key), request.query.get(before_key) if before_key else None
        if after is not None or before is not None:
            cursor = after if after is not None else before
            if cursor not in ids:
                return error(400, f"no batch {cursor!r} to page from")
            at = ids.index(str(cursor))
            if after is not None:
                page = ordered[at + 1:at + 1 + limit]
                return page, at + 1 + limit < len(ordered)
            page = ordered[max(0, at - limit):at]
            return page, at - limit > 0
        return ordered[:limit], limit < len(ordered)

    def _openai_list(self, request: web.BaseRequest) -> web.Response:
        got = self._page("openai", request, 100, "after", None)
        if isinstance(got, web.Response):
            return got
        page, more = got
        data = [self._openai_object(b) for b in page]
        return _json({"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                      "last_id": data[-1]["id"] if data else None, "has_more": more})

    def _anthropic_list(self, request: web.BaseRequest) -> web.Response:
        got = self._page("anthropic", request, 1000, "after_id", "before_id")
        if isinstance(got, web.Response):
            return got
        page, more = got
        data = [self._anthropic_object(b, request) for b in page]
        return _json({"data": data, "first_id": data[0]["id"] if data else None,
                      "last_id": data[-1]["id"] if data else None, "has_more": more})

    # ------------------------------------------------------------------ OpenAI

    async def _files(self, request: web.BaseRequest, method: str, rest: list[str]) -> web.Response:
        if method == "POST" and not rest:
            # read as a stream: batch files are far larger than aiohttp's 1 MB body limit
            fields: dict[str, tuple[str | None, bytes]] = {}
            try:
                reader = await request.multipart()
                while (part := await reader.next()) is not None:
                    if isinstance(part, BodyPartReader) and part.name:
                        fields[part.name] = (part.filename, bytes(await part.read()))
            except (ValueError, AssertionError, KeyError):
                return _openai_error(400, "the body must be multipart/form-data with 'file' and 'purpose'")
            purpose = fields.get("purpose", (None, b""))[1].decode("utf-8", "replace")
            if not purpose:
                return _openai_error(400, "'purpose' is a required property", param="purpose")
            if "file" not in fields:
                return _openai_error(400, "'file' is a required property", param="file")
            name, content = fields["file"]
            if not await self._hold("upload", request):
                return _openai_error(499, "client closed the request")
            f = SimFile(self._id("file-"), name or "upload.jsonl", purpose, content, int(time.time()))
            self.files[f.id] = f
            return _json(f.meta())
        found = self.files.get(rest[0]) if rest else None
        if found is None:
            return _openai_error(404, f"No such File object: {rest[0] if rest else ''}", param="id")
        if method == "GET" and len(rest) == 1:
            return _json(found.meta())
        if method == "GET" and rest[1:] == ["content"]:
            return web.Response(body=found.data, content_type="application/octet-stream")
        return _openai_error(404, f"no route {method} /v1/files/{'/'.join(rest)}")

    async def _openai_create(self, request: web.BaseRequest) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _openai_error(400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return _openai_error(400, "the request body must be a JSON object")
        endpoint, window = body.get("endpoint"), body.get("completion_window")
        if endpoint not in _OPENAI_ENDPOINTS + ("/v1/embeddings", "/v1/responses"):
            return _openai_error(400, f"Invalid value for 'endpoint': {endpoint!r}.", "invalid_value", "endpoint")
        if endpoint not in _OPENAI_ENDPOINTS:
            return _openai_error(400, f"the simulator serves {', '.join(_OPENAI_ENDPOINTS)} only", param="endpoint")
        if window != "24h":
            return _openai_error(400, f"Invalid value for 'completion_window': {window!r}. Supported values are: "
                                 "'24h'.", "invalid_value", "completion_window")
        f = self.files.get(str(body.get("input_file_id")))
        if f is None:
            return _openai_error(404, f"No such File object: {body.get('input_file_id')}", param="input_file_id")
        if f.purpose != "batch":
            return _openai_error(400, f"File {f.id} has purpose {f.purpose!r}; batches need purpose 'batch'",
                                 param="input_file_id")
        metadata = body.get("metadata")
        if metadata is not None and (not isinstance(metadata, dict) or len(metadata) > 16 or any(
                not isinstance(k, str) or not isinstance(v, str) or len(k) > 64 or len(v) > 512
                for k, v in metadata.items())):
            return _openai_error(400, "Invalid 'metadata': at most 16 pairs of strings, keys of up to 64 and values "
                                 "of up to 512 characters.", "invalid_value", "metadata")
        if not await self._hold("create", request):
            return _openai_error(499, "client closed the request")
        stats = self.server.stats
        stats.batches_submitted += 1
        now = int(time.time())
        batch = SimBatch(self._id("batch_"), "openai", endpoint, [], now,
                         expire=stats.batches_submitted <= self.server.config.batch_expire)
        batch.info = {"status": "validating", "input_file_id": f.id, "completion_window": "24h",
                      "metadata": body.get("metadata"), "errors": None, "output_file_id": None,
                      "error_file_id": None, "request_counts": {"total": 0, "completed": 0, "failed": 0},
                      "expires_at": now + 86400}
        self.batches[batch.id] = batch
        batch.task = asyncio.get_running_loop().create_task(self._run_openai(batch, f.data))
        await self._hold("created", request)
        return _json(self._openai_object(batch))

    def _openai_object(self, b: SimBatch) -> dict[str, Any]:
        info = b.info
        return {"id": b.id, "object": "batch", "endpoint": b.endpoint, "errors": info["errors"],
                "input_file_id": info["input_file_id"], "completion_window": "24h", "status": info["status"],
                "output_file_id": info["output_file_id"], "error_file_id": info["error_file_id"],
                "created_at": b.created_at, "in_progress_at": info.get("in_progress_at"),
                "expires_at": info["expires_at"], "finalizing_at": info.get("finalizing_at"),
                "completed_at": info.get("completed_at"), "failed_at": info.get("failed_at"),
                "expired_at": info.get("expired_at"), "cancelling_at": info.get("cancelling_at"),
                "cancelled_at": info.get("cancelled_at"), "request_counts": dict(info["request_counts"]),
                "metadata": info["metadata"]}

    def _validate_openai(self, b: SimBatch, data: bytes) -> list[dict[str, Any]]:
        """The input file's lines as the real service checks them; errors as it lists them."""
        cfg = self.server.config
        if len(data) > cfg.openai_batch_max_bytes:
            return [{"code": "file_too_large", "message": f"The input file is {len(data)} bytes; the maximum is "
                     f"{cfg.openai_batch_max_bytes} bytes.", "param": None, "line": None}]
        lines = [ln for ln in data.split(b"\n") if ln.strip()]
        if not lines:
            return [{"code": "empty_file", "message": "The input file is empty.", "param": None, "line": None}]
        if len(lines) > cfg.openai_batch_max_requests:
            return [{"code": "too_many_requests", "message": f"The batch has {len(lines)} requests; the maximum "
                     f"is {cfg.openai_batch_max_requests}.", "param": None, "line": None}]
        errors: list[dict[str, Any]] = []
        seen: set[str] = set()
        model = None
        for n, raw in enumerate(lines, 1):
            def bad(code: str, message: str, param: str | None = None) -> None:
                errors.append({"code": code, "message": message, "param": param, "line": n})  # noqa: B023
            try:
                line = json.loads(raw)
            except ValueError:
                bad("invalid_json_line", "This line is not parseable as valid JSON.")
                continue
            if not isinstance(line, dict):
                bad("invalid_json_line", "This line is not a JSON object.")
                continue
            cid, body = line.get("custom_id"), line.get("body")
            if not isinstance(cid, str) or not cid:
                bad("missing_required_parameter", "Missing required parameter: 'custom_id'.", "custom_id")
                continue
            if cid in seen:
                bad("duplicate_custom_id", "The custom_id for this request is a duplicate of another request. "
                    "The custom_id parameter must be unique for each request in a batch.", "custom_id")
                continue
            seen.add(cid)
            if line.get("method") != "POST":
                bad("invalid_request", "Only POST requests are supported in a batch.", "method")
                continue
            if line.get("url") != b.endpoint:
                bad("mismatched_endpoint", f"The url for this request does not match the batch endpoint "
                    f"{b.endpoint}.", "url")
                continue
            if not isinstance(body, dict) or not body.get("model"):
                bad("missing_required_parameter", "Missing required parameter: 'body.model'.", "body.model")
                continue
            if model is not None and body["model"] != model:
                bad("mismatched_model", "All requests in a batch must use the same model.", "body.model")
                continue
            model = body["model"]
            b.requests.append((cid, body))
        return errors

    async def _run_openai(self, b: SimBatch, data: bytes) -> None:
        turnaround = self.server.config.batch_turnaround_s
        await asyncio.sleep(min(0.05, turnaround / 4))
        errors = self._validate_openai(b, data)
        if errors:
            b.info.update(status="failed", failed_at=int(time.time()),
                          errors={"object": "list", "data": errors})
            b.requests.clear()
            return
        counts = b.info["request_counts"]
        counts["total"] = len(b.requests)
        b.info.update(status="in_progress", in_progress_at=int(time.time()))
        self.server.stats.batch_requests += len(b.requests)
        await asyncio.sleep(turnaround / 2)
        out: list[dict[str, Any]] = []
        err: list[dict[str, Any]] = []
        todo = b.requests[: (len(b.requests) + 1) // 2] if b.expire else b.requests
        fmt = ROUTES[b.endpoint]
        for i, (cid, body) in enumerate(todo):
            if b.cancelled:
                break
            status, payload = self.answer(fmt, body, cid)
            line = {"id": f"batch_req_{cid[:16]}{i:08x}", "custom_id": cid,
                    "response": {"status_code": status, "request_id": f"req_{i:012x}", "body": payload},
                    "error": None}
            (out if status == 200 else err).append(line)
            counts["completed" if status == 200 else "failed"] += 1
            if i % 64 == 63:
                await asyncio.sleep(0)
        await asyncio.sleep(turnaround / 2)
        done = {ln["custom_id"] for ln in out + err}
        reason = ("batch_cancelled", "This request was cancelled.") if b.cancelled else ("batch_expired", _EXPIRED_MSG)
        for cid, _ in b.requests:
            if cid not in done:
                err.append({"id": f"batch_req_{cid[:24]}", "custom_id": cid, "response": None,
                            "error": {"code": reason[0], "message": reason[1]}})
                counts["failed"] += 1
        b.info["status"] = "finalizing"
        b.info["finalizing_at"] = int(time.time())
        for name, lines in (("output_file_id", out), ("error_file_id", err)):
            if lines:
                f = SimFile(self._id("file-"), f"{b.id}_{name.split('_')[0]}.jsonl", "batch_output",
                            "".join(json.dumps(ln, separators=(",", ":")) + "\n" for ln in lines).encode(),
                            int(time.time()))
                self.files[f.id] = f
                b.info[name] = f.id
        now = int(time.time())
        if b.cancelled:
            b.info.update(status="cancelled", cancelled_at=now)
        elif b.expire:
            b.info.update(status="expired", expired_at=now)
        else:
            b.info.update(status="completed", completed_at=now)

    # ------------------------------------------------------------------ Anthropic

    async def _anthropic_create(self, request: web.BaseRequest) -> web.Response:
        cfg = self.server.config
        raw = await request.read()
        if len(raw) > cfg.anthropic_batch_max_bytes:
            return _anthropic_error(413, "request_too_large",
                                    f"Request exceeds the maximum allowed number of bytes "
                                    f"({cfg.anthropic_batch_max_bytes}).")
        try:
            body = json.loads(raw)
        except ValueError:
            return _anthropic_error(400, "invalid_request_error", "The request body is not valid JSON.")
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return _anthropic_error(400, "invalid_request_error", "requests: Field required (a non-empty list)")
        if len(requests) > cfg.anthropic_batch_max_requests:
            return _anthropic_error(400, "invalid_request_error",
                                    f"requests: List should have at most {cfg.anthropic_batch_max_requests} items "
                                    f"after validation, not {len(requests)}")
        seen: set[str] = set()
        parsed = []
        for n, item in enumerate(requests):
            if not isinstance(item, dict) or not isinstance(item.get("params"), dict):
                return _anthropic_error(400, "invalid_request_error", f"requests.{n}.params: Field required")
            cid = item.get("custom_id")
            if not isinstance(cid, str) or not _CUSTOM_ID.match(cid):
                return _anthropic_error(400, "invalid_request_error",
                                        f"requests.{n}.custom_id: String should match pattern "
                                        f"'^[a-zA-Z0-9_-]{{1,64}}$'")
            if cid in seen:
                return _anthropic_error(400, "invalid_request_error",
                                        f"Duplicate custom_id '{cid}' found in requests. Each custom_id must be "
                                        "unique within a batch.")
            seen.add(cid)
            parsed.append((cid, item["params"]))
        if not await self._hold("create", request):
            return _anthropic_error(499, "invalid_request_error", "client closed the request")
        stats = self.server.stats
        stats.batches_submitted += 1
        stats.batch_requests += len(parsed)
        now = time.time()
        batch = SimBatch(self._id("msgbatch_"), "anthropic", "/v1/messages", parsed, int(now),
                         expire=stats.batches_submitted <= cfg.batch_expire)
        batch.info = {"processing_status": "in_progress", "created_at": _iso(now), "expires_at": _iso(now + 86400),
                      "ended_at": None, "cancel_initiated_at": None,
                      "request_counts": {"processing": len(parsed), "succeeded": 0, "errored": 0, "canceled": 0,
                                         "expired": 0}}
        self.batches[batch.id] = batch
        batch.task = asyncio.get_running_loop().create_task(self._run_anthropic(batch))
        await self._hold("created", request)
        return _json(self._anthropic_object(batch, request))

    def _anthropic_object(self, b: SimBatch, request: web.BaseRequest) -> dict[str, Any]:
        ended = b.info["processing_status"] == "ended"
        base = f"{request.scheme}://{request.host}"
        return {"id": b.id, "type": "message_batch", "processing_status": b.info["processing_status"],
                "request_counts": dict(b.info["request_counts"]), "ended_at": b.info["ended_at"],
                "created_at": b.info["created_at"], "expires_at": b.info["expires_at"], "archived_at": None,
                "cancel_initiated_at": b.info["cancel_initiated_at"],
                "results_url": f"{base}/v1/messages/batches/{b.id}/results" if ended else None}

    async def _run_anthropic(self, b: SimBatch) -> None:
        turnaround = self.server.config.batch_turnaround_s
        await asyncio.sleep(turnaround / 2)
        counts = b.info["request_counts"]
        fmt = ROUTES["/v1/messages"]
        todo = b.requests[: (len(b.requests) + 1) // 2] if b.expire else b.requests
        for i, (cid, params) in enumerate(todo):
            if b.cancelled:
                break
            status, payload = self.answer(fmt, params, cid)
            if status == 200:
                b.results.append({"custom_id": cid, "result": {"type": "succeeded", "message": payload}})
                counts["succeeded"] += 1
            else:
                b.results.append({"custom_id": cid, "result": {"type": "errored", "error": payload}})
                counts["errored"] += 1
            counts["processing"] -= 1
            if i % 64 == 63:
                await asyncio.sleep(0)
        await asyncio.sleep(turnaround / 2)
        done = {r["custom_id"] for r in b.results}
        kind = "canceled" if b.cancelled else "expired"
        for cid, _ in b.requests:
            if cid not in done:
                b.results.append({"custom_id": cid, "result": {"type": kind}})
                counts[kind] += 1
                counts["processing"] -= 1
        b.info.update(processing_status="ended", ended_at=_iso(time.time()))

    # ------------------------------------------------------------------ one request

    def answer(self, fmt: WireFormat, body: Any, custom_id: str) -> tuple[int, dict[str, Any]]:
        """One request of a batch, answered as the live route would (status, body)."""
        server = self.server
        raw = json.dumps(body).encode()
        try:
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            call = fmt.parse(body)
        except BadRequest as exc:
            return exc.status, fmt.error(exc.status, exc.kind, str(exc), None)
        if not call.model:
            call.model = server.config.model_id
        text = call.text()
        fingerprint = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        server.stats.log.append(fingerprint)
        server.stats.times.append(time.time())
        attempt = server._attempts.get(fingerprint, 0)
        server._attempts[fingerprint] = attempt + 1
        refusal = server.check_context(fmt, call, text)
        if refusal is not None:
            server.stats.context_length_errors += 1
            return refusal.status, json.loads(refusal.body)
        cfg = server.config
        if cfg.error_rate and random.Random(f"{cfg.seed}:{fingerprint}:{attempt}:batch").random() < cfg.error_rate:
            server.stats.errors_5xx += 1
            kind = "api_error" if fmt.api == "anthropic" else "server_error"
            return 500, fmt.error(500, kind, "The server had an error while processing your request (simulated).",
                                  None)
        answers = server.answers(fmt, call, fingerprint, raw)
        server._next_id += 1
        payload = fmt.render(call, answers, f"sim{server._next_id:012x}")
        server.served(fingerprint, answers)
        return 200, payload


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1e6):06d}Z"
