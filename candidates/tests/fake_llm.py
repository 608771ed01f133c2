"""A small HTTP server that speaks the OpenAI and Gemini wire formats, for tests and the benchmark.

It answers ``POST /v1/chat/completions`` (OpenAI, also what vLLM / Ollama / SGLang serve) and
``POST /v1beta/models/{model}:generateContent`` (Gemini). Every request is recorded (path,
headers, JSON body, arrival time), so tests can check what the real SDKs sent.

Behaviour is planned per model name: ``server.plan("gpt-x", ["429:2", "ok"])`` makes the next
request for that model answer 429 with ``Retry-After: 2``, the one after it normally; once the
plan is used up every request answers ``default`` ("ok"). Behaviours:

- ``ok``: a well-formed reply made by ``reply_for(text)`` (the user text of the request).
- ``slow:S``: wait S seconds, then ``ok``.
- ``hang``: wait 30 s (longer than any client timeout in the tests).
- ``429:S``: 429 with Retry-After S. ``500``, ``503``: server errors. ``401``, ``400``: client errors.
- ``fenced``: the JSON inside a ```json fence after some prose, with a trailing comma.
- ``prose``: no JSON object at all.
- ``truncated``: a JSON object cut in the middle.
- ``extra_missing``: an extra field, a missing field and a wrong-type field.
- ``bad_boxes``: 0-1 float boxes and out-of-range boxes next to one valid box.
- ``body:TEXT``: reply content TEXT verbatim.
- ``badbody``: HTTP 200 whose body is not JSON at all.

``reply_by_model`` (optional) gives one model its own ``reply_for`` (two judges that differ).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GEMINI_PATH = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):generateContent$")


def meme3w_reply(text: str) -> dict:
    """A plausible Meme3W answer for a test caption (harmful when it mentions Zorg)."""
    if "Zorg" in text:
        mention = "people from Planet Zorg" if "people from Planet Zorg" in text else "Zorg"
        return {
            "think": "Step 1: ... Step 5: harmful, group background.",
            "label": "harmful",
            "target_category": "group background",
            "target_entity": "people from Planet Zorg",
            "text_mention": mention,
            "visual_region": [[100, 150, 600, 900]],
        }
    return {
        "think": "No targeted harmful behaviour.",
        "label": "non-harmful",
        "target_category": None,
        "target_entity": None,
        "text_mention": None,
        "visual_region": [],
    }


def item_text_of(prompt_text: str) -> str:
    """The item text inside our user prompt (between the ITEM TEXT markers), else the whole text."""
    m = re.search(r"<<<ITEM TEXT\n(.*?)\nITEM TEXT>>>", prompt_text, re.S)
    return m.group(1) if m else prompt_text


@dataclass
class Recorded:
    path: str
    headers: dict
    body: Any
    at: float
    model: str
    kind: str  # "openai" | "gemini"
    behaviour: str
    user_text: str = ""
    image_mime: str = ""
    image_bytes: bytes = b""


@dataclass
class FakeLLM:
    latency: float = 0.0
    default: str = "ok"
    reply_for: Callable[[str], dict] = meme3w_reply
    reply_by_model: dict[str, Callable[[str], dict]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    plans: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def __post_init__(self):
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                fake._handle(self)

            def do_GET(self):
                self._send(404, {"error": {"message": "not found"}})

            def _send(self, status, payload, headers=None, raw: bytes | None = None):
                data = raw if raw is not None else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- control -----------------------------------------------------------------------------
    def start(self) -> FakeLLM:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def plan(self, model: str, behaviours: list[str]) -> None:
        with self._lock:
            self.plans[model].extend(behaviours)

    def for_model(self, model: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.model == model]

    # -- serving -----------------------------------------------------------------------------
    def _next_behaviour(self, model: str) -> str:
        with self._lock:
            plan = self.plans.get(model)
            return plan.pop(0) if plan else self.default

    def _handle(self, h) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            h._send(400, {"error": {"message": "request body is not JSON"}})
            return
        path = h.path.split("?", 1)[0]
        gm = GEMINI_PATH.match(path)
        if path.endswith("/chat/completions"):
            kind, model = "openai", str(body.get("model", ""))
            user_text, mime, img = _openai_user_parts(body)
        elif gm:
            kind, model = "gemini", gm.group("model")
            user_text, mime, img = _gemini_user_parts(body)
        else:
            h._send(404, {"error": {"message": f"no route {path}"}})
            return
        behaviour = self._next_behaviour(model)
        rec = Recorded(
            path=path,
            headers={k.lower(): v for k, v in h.headers.items()},
            body=body,
            at=time.time(),
            model=model,
            kind=kind,
            behaviour=behaviour,
            user_text=user_text,
            image_mime=mime,
            image_bytes=img,
        )
        with self._lock:
            self.requests.append(rec)
        if self.latency:
            time.sleep(self.latency)
        name, _, arg = behaviour.partition(":")
        if name == "slow":
            time.sleep(float(arg))
            name = "ok"
        if name == "hang":
            time.sleep(30)
            name = "ok"
        if name == "badbody":  # a 200 whose body is not JSON (a proxy's error page, a cut stream)
            h._send(200, None, raw=b"<html>upstream hiccup</html>")
            return
        if name in ("429", "500", "503", "401", "400"):
            status = int(name)
            headers = {"Retry-After": arg} if name == "429" and arg else {}
            h._send(status, _error(kind, status), headers)
            return
        content = self._content(name, arg, item_text_of(user_text), model)
        if content is None:
            h._send(500, _error(kind, 500))
            return
        if kind == "openai":
            payload = {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model + "-served",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280},
            }
        else:
            payload = {
                "candidates": [
                    {"content": {"parts": [{"text": content}], "role": "model"}, "finishReason": "STOP", "index": 0}
                ],
                "usageMetadata": {"promptTokenCount": 1100, "candidatesTokenCount": 70, "totalTokenCount": 1170},
                "modelVersion": model + "-001",
            }
        h._send(200, payload)

    def _content(self, name: str, arg: str, text: str, model: str = "") -> str | None:
        reply = self.reply_by_model.get(model, self.reply_for)(text)
        if name == "ok":
            return json.dumps(reply)
        if name == "fenced":
            body = json.dumps(reply, indent=2)
            body = body[: body.rstrip().rfind("}")].rstrip() + ",\n}"  # trailing comma
            return f"Here is my analysis of the meme.\n\n```json\n{body}\n```\nLet me know if you need more."
        if name == "prose":
            return "I cannot help with that request."
        if name == "truncated":
            return json.dumps(reply)[:40]
        if name == "extra_missing":
            bad = dict(reply)
            bad.pop("text_mention", None)
            bad["confidence"] = 0.9
            bad["target_entity"] = ["not", "a", "string"] if bad.get("label") == "harmful" else None
            return json.dumps(bad)
        if name == "bad_boxes":
            bad = dict(reply)
            bad["visual_region"] = [[0.1, 0.2, 0.5, 0.9], [100, 100, 1500, 900], [50, 60, 400, 700]]
            return json.dumps(bad)
        if name == "body":
            return arg
        return None


def _error(kind: str, status: int) -> dict:
    names = {
        429: "RESOURCE_EXHAUSTED",
        500: "INTERNAL",
        503: "UNAVAILABLE",
        401: "UNAUTHENTICATED",
        400: "INVALID_ARGUMENT",
    }
    if kind == "gemini":
        return {"error": {"code": status, "message": f"fake error {status}", "status": names.get(status, "UNKNOWN")}}
    return {"error": {"message": f"fake error {status}", "type": names.get(status, "error").lower(), "code": None}}


def _openai_user_parts(body: dict) -> tuple[str, str, bytes]:
    text, mime, img = [], "", b""
    for msg in body.get("messages") or []:
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            text.append(content)
            continue
        for part in content or []:
            if part.get("type") == "text":
                text.append(part.get("text", ""))
            elif part.get("type") == "image_url":
                url = (part.get("image_url") or {}).get("url", "")
                m = re.match(r"data:([^;]+);base64,(.*)$", url, re.S)
                if m:
                    mime, img = m.group(1), base64.b64decode(m.group(2))
    return "\n".join(text), mime, img


def _b64(data: str) -> bytes:
    # The google-genai SDK sends unpadded URL-safe base64; the Gemini API accepts both alphabets.
    data = data.replace("-", "+").replace("_", "/")
    return base64.b64decode(data + "=" * (-len(data) % 4))


def _gemini_user_parts(body: dict) -> tuple[str, str, bytes]:
    text, mime, img = [], "", b""
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            if "text" in part:
                text.append(part["text"])
            inline = part.get("inlineData") or part.get("inline_data")
            if inline:
                mime = inline.get("mimeType") or inline.get("mime_type", "")
                img = _b64(inline.get("data", ""))
    return "\n".join(text), mime, img


if __name__ == "__main__":  # manual use: python -m candidates.tests.fake_llm
    srv = FakeLLM(latency=0.3).start()
    print(srv.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()
