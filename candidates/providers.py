"""Model providers behind one small interface: ``client_for(config).generate(request)``.

Every client makes exactly one HTTP request per call (the SDKs' own retries are switched off):
retries, backoff and rate limits belong to the Celery task, where they hold across workers and
do not occupy a worker while waiting.

Errors are sorted into two kinds the task acts on:
- ``TransientProviderError``: 429, 408, 409, 5xx, timeouts, connection failures -> retry with
  backoff (honouring Retry-After);
- ``PermanentProviderError``: other 4xx (authentication, validation), a missing API key, a
  missing replay line -> no retry, the task fails with the message.
"""

from __future__ import annotations

import base64
import email.utils
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx

from candidates.endpoints import EndpointRefused, base_url_check, replay_file_path

try:  # the openai and google-genai SDKs of this environment use httpx2
    import httpx2
except ImportError:  # pragma: no cover
    httpx2 = None

TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (httpx.TransportError,) + (
    (httpx2.TransportError,) if httpx2 is not None else ()
)
RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class ProviderError(Exception):
    retryable = False

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class TransientProviderError(ProviderError):
    retryable = True


class PermanentProviderError(ProviderError):
    retryable = False


@dataclass(frozen=True)
class ProviderConfig:
    """What a client needs; built from a ``Provider`` row, usable without the database."""

    kind: str
    model: str
    base_url: str = ""
    api_key_env: str = ""
    timeout_seconds: float = 60.0
    replay_path: str = ""
    temperature: float = 0.0
    # Room for the "think" field and, on reasoning models, their hidden reasoning tokens.
    max_output_tokens: int = 8192

    @classmethod
    def from_provider(cls, provider) -> ProviderConfig:
        replay = ""
        if provider.replay_file:
            try:
                replay = str(replay_file_path(provider.project_id, provider.replay_file))
            except EndpointRefused as exc:
                raise PermanentProviderError(f"replay file: {exc}") from None
        return cls(
            kind=provider.kind,
            model=provider.model,
            base_url=provider.base_url,
            api_key_env=provider.api_key_env,
            timeout_seconds=provider.timeout_seconds,
            replay_path=replay,
        )


@dataclass(frozen=True)
class CandidateRequest:
    system: str
    user: str
    image: bytes
    image_mime: str
    # Keys a replay file may use to find the item's line.
    item_id: int | None = None
    source_id: str = ""
    import_key: str = ""
    #: A replay file's ``replay_key`` for this exact request, looked up before the item keys
    #: (a judge's replay file answers several models' responses to one item). Never sent to
    #: a network provider.
    replay_key: str = ""


@dataclass(frozen=True)
class ProviderReply:
    text: str
    model_name: str
    latency_ms: int
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class Client(Protocol):
    def generate(self, request: CandidateRequest) -> ProviderReply: ...


def api_key_from_env(name: str, *, required: bool) -> str | None:
    """The key is read from the environment of the process making the call, never stored."""
    if not name:
        if required:
            raise PermanentProviderError("no API key variable configured for this provider")
        return None
    value = os.environ.get(name)
    if not value:
        if required:
            raise PermanentProviderError(f"environment variable {name} is not set in the worker")
        return None
    return value


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Retry-After as seconds: a number, or an HTTP date (RFC 9110 section 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (now if now is not None else time.time())
    return max(0.0, seconds)


def _retry_after_from_headers(headers) -> float | None:
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"))


def _status_error(status: int, message: str, headers) -> ProviderError:
    if status in RETRYABLE_STATUS or status >= 500:
        return TransientProviderError(
            f"HTTP {status}: {message}", status=status, retry_after=_retry_after_from_headers(headers)
        )
    return PermanentProviderError(f"HTTP {status}: {message}", status=status)


def _short(text: str, n: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


_SDK_CLIENTS: dict[tuple, object] = {}
_SDK_LOCK = threading.Lock()


def _cached_sdk_client(key: tuple, factory):
    """SDK clients are thread-safe and costly to build (TLS context, connection pool): reuse them
    per process for the same endpoint, key and timeout."""
    with _SDK_LOCK:
        client = _SDK_CLIENTS.get(key)
        if client is None:
            if len(_SDK_CLIENTS) > 64:
                _SDK_CLIENTS.clear()
            client = _SDK_CLIENTS[key] = factory()
        return client


class OpenAIChatClient:
    """OpenAI chat completions; also vLLM / Ollama / SGLang through their OpenAI-compatible API."""

    def __init__(self, config: ProviderConfig):
        self.config = config

    def _client(self):
        from openai import OpenAI

        compatible = self.config.kind == "openai-compatible"
        if compatible and not self.config.base_url:
            raise PermanentProviderError("an openai-compatible provider needs a base URL")
        # Local servers usually need no key (the SDK insists on a non-empty one); but a key
        # variable that is configured and missing is an error, not a silent anonymous call.
        required = bool(self.config.api_key_env) or not compatible
        key = api_key_from_env(self.config.api_key_env, required=required) or "not-needed"
        return _cached_sdk_client(
            ("openai", self.config.base_url, key, self.config.timeout_seconds),
            lambda: OpenAI(
                api_key=key,
                base_url=self.config.base_url or None,
                timeout=self.config.timeout_seconds,
                max_retries=0,
            ),
        )

    def _sampling(self) -> dict:
        if self.config.kind == "openai":
            # OpenAI's reasoning models (o-series, GPT-5) refuse max_tokens and any temperature
            # but the default; max_completion_tokens is accepted by every current chat model.
            return {"max_completion_tokens": self.config.max_output_tokens}
        # vLLM / Ollama / SGLang: greedy decoding, and the classic parameter name they all know.
        return {"temperature": self.config.temperature, "max_tokens": self.config.max_output_tokens}

    def generate(self, request: CandidateRequest) -> ProviderReply:
        import openai

        client = self._client()
        data_url = f"data:{request.image_mime};base64,{base64.b64encode(request.image).decode()}"
        messages = [
            {"role": "system", "content": request.system},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": request.user},
                    {"type": "image_url", "image_url": {"url": data_url}},
                ],
            },
        ]
        start = time.monotonic()
        try:
            resp = client.chat.completions.create(
                model=self.config.model,
                messages=messages,
                response_format={"type": "json_object"},
                **self._sampling(),
            )
        except openai.APIStatusError as exc:
            raise _status_error(exc.status_code, _short(exc.message), exc.response.headers) from exc
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise TransientProviderError(f"{type(exc).__name__}: {_short(exc)}") from exc
        except ValueError as exc:  # a 200 whose body is not the expected JSON (proxy page, cut stream)
            raise TransientProviderError(f"unreadable response body: {_short(exc)}") from exc
        except openai.OpenAIError as exc:
            raise PermanentProviderError(f"{type(exc).__name__}: {_short(exc)}") from exc
        latency = int((time.monotonic() - start) * 1000)
        if not resp.choices:
            raise TransientProviderError("the reply has no choices")
        text = resp.choices[0].message.content or ""
        usage = resp.usage
        return ProviderReply(
            text=text,
            model_name=resp.model or self.config.model,
            latency_ms=latency,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
        )


class GeminiClient:
    def __init__(self, config: ProviderConfig):
        self.config = config

    def generate(self, request: CandidateRequest) -> ProviderReply:
        from google import genai
        from google.genai import errors, types

        key = api_key_from_env(self.config.api_key_env, required=True)
        http_options = types.HttpOptions(
            api_version="v1beta",
            timeout=int(self.config.timeout_seconds * 1000),  # milliseconds
            retry_options=types.HttpRetryOptions(attempts=1),
            **({"base_url": self.config.base_url} if self.config.base_url else {}),
        )
        client = _cached_sdk_client(
            ("gemini", self.config.base_url, key, self.config.timeout_seconds),
            lambda: genai.Client(api_key=key, http_options=http_options),
        )
        config = types.GenerateContentConfig(
            system_instruction=request.system,
            response_mime_type="application/json",
            temperature=self.config.temperature,
            max_output_tokens=self.config.max_output_tokens,
        )
        start = time.monotonic()
        try:
            resp = client.models.generate_content(
                model=self.config.model,
                contents=[types.Part.from_bytes(data=request.image, mime_type=request.image_mime), request.user],
                config=config,
            )
        except errors.APIError as exc:
            headers = getattr(exc.response, "headers", None)
            raise _status_error(int(exc.code or 0), _short(exc.message or exc), headers) from exc
        except TRANSPORT_ERRORS as exc:
            raise TransientProviderError(f"{type(exc).__name__}: {_short(exc) or 'transport error'}") from exc
        except ValueError as exc:  # a 200 whose body is not the expected JSON
            raise TransientProviderError(f"unreadable response body: {_short(exc)}") from exc
        latency = int((time.monotonic() - start) * 1000)
        try:
            text = resp.text or ""
        except ValueError as exc:  # blocked / no candidates
            raise PermanentProviderError(f"no text in the reply: {_short(exc)}") from exc
        usage = resp.usage_metadata
        return ProviderReply(
            text=text,
            model_name=resp.model_version or self.config.model,
            latency_ms=latency,
            prompt_tokens=getattr(usage, "prompt_token_count", None),
            completion_tokens=getattr(usage, "candidates_token_count", None),
        )


class ReplayClient:
    """Replies someone already produced, from a JSONL file.

    One object per line: ``{"replay_key" | "source_id" | "item_id" | "import_key": ..., "reply":
    "<raw reply text>" | {...}, "model": optional}`` (``replay_key``: one request, e.g. a judge's
    answer to one model's response, evaluation.judging.judge_replay_key). Lines with a ``model`` key are used only by the
    provider of that model name, so one file can hold several models' replies.
    """

    _cache: dict[tuple[str, float], dict] = {}
    _lock = threading.Lock()

    def __init__(self, config: ProviderConfig):
        self.config = config

    def _index(self) -> dict:
        path = Path(self.config.replay_path)
        try:
            mtime = path.stat().st_mtime
        except OSError as exc:
            raise PermanentProviderError(f"replay file {path.name} is not readable") from exc
        key = (str(path), mtime)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        index: dict = {}
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as exc:
                    raise PermanentProviderError(f"replay file {path.name} line {lineno} is not JSON") from exc
                if not isinstance(row, dict) or "reply" not in row:
                    raise PermanentProviderError(f"replay file {path.name} line {lineno} has no reply")
                model = row.get("model")
                for field in ("replay_key", "source_id", "item_id", "import_key"):
                    if row.get(field) not in (None, ""):
                        index[(model, field, str(row[field]))] = row
        with self._lock:
            self._cache.clear()
            self._cache[key] = index
        return index

    def generate(self, request: CandidateRequest) -> ProviderReply:
        start = time.monotonic()
        index = self._index()
        row = None
        for model in (self.config.model, None):
            for field, value in (
                ("replay_key", request.replay_key),
                ("item_id", request.item_id),
                ("source_id", request.source_id),
                ("import_key", request.import_key),
            ):
                if value not in (None, "") and (model, field, str(value)) in index:
                    row = index[(model, field, str(value))]
                    break
            if row:
                break
        if row is None:
            raise PermanentProviderError("the replay file has no reply for this item")
        reply = row["reply"]
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return ProviderReply(
            text=text,
            model_name=str(row.get("model") or self.config.model),
            latency_ms=int(row.get("latency_ms") or (time.monotonic() - start) * 1000),
            prompt_tokens=row.get("prompt_tokens"),
            completion_tokens=row.get("completion_tokens"),
        )


CLIENTS = {
    "openai": OpenAIChatClient,
    "openai-compatible": OpenAIChatClient,
    "gemini": GeminiClient,
    "replay": ReplayClient,
}


def client_for(config: ProviderConfig) -> Client:
    if config.base_url:
        try:  # again at call time: the name may resolve elsewhere than when it was saved
            base_url_check(config.base_url)
        except EndpointRefused as exc:
            raise PermanentProviderError(f"base URL refused: {exc}") from None
    try:
        return CLIENTS[config.kind](config)
    except KeyError:
        raise PermanentProviderError(f"unknown provider kind {config.kind!r}") from None
