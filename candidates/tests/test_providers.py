"""The real SDKs against our fake server: wire format, JSON mode, errors sorted for retry."""

from __future__ import annotations

import json
import time

import pytest

from candidates.providers import (
    CandidateRequest,
    PermanentProviderError,
    ProviderConfig,
    TransientProviderError,
    client_for,
    parse_retry_after,
)

IMAGE = b"\x89PNG\r\n\x1a\n fake png bytes"
REQ = CandidateRequest(
    system="SYSTEM PROMPT",
    user="<<<ITEM TEXT\nZorg meme\nITEM TEXT>>>",
    image=IMAGE,
    image_mime="image/png",
    item_id=7,
    source_id="s7",
)


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("T_OPENAI", "sk-abc")
    monkeypatch.setenv("T_GEMINI", "gk-abc")


def openai_cfg(server, **kw):
    return ProviderConfig(
        kind="openai",
        model="gpt-t",
        base_url=f"{server.url}/v1",
        api_key_env="T_OPENAI",
        timeout_seconds=kw.pop("timeout", 2),
        **kw,
    )


def gemini_cfg(server, **kw):
    return ProviderConfig(
        kind="gemini",
        model="gem-t",
        base_url=server.url,
        api_key_env="T_GEMINI",
        timeout_seconds=kw.pop("timeout", 2),
        **kw,
    )


def test_openai_sends_inline_image_and_json_mode(fake_llm, keys):
    reply = client_for(openai_cfg(fake_llm)).generate(REQ)
    (req,) = fake_llm.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-abc"
    assert req.body["response_format"] == {"type": "json_object"}
    assert req.body["model"] == "gpt-t"
    assert req.body["max_completion_tokens"] == 8192 and "temperature" not in req.body
    assert req.body["messages"][0] == {"role": "system", "content": "SYSTEM PROMPT"}
    url = req.body["messages"][1]["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert req.image_bytes == IMAGE and req.image_mime == "image/png"
    assert json.loads(reply.text)["label"] == "harmful"
    assert reply.model_name == "gpt-t-served"
    assert (reply.prompt_tokens, reply.completion_tokens) == (1200, 80)
    assert reply.latency_ms >= 0


def test_gemini_sends_inline_data_part_and_json_mime(fake_llm, keys):
    reply = client_for(gemini_cfg(fake_llm)).generate(REQ)
    (req,) = fake_llm.requests
    assert req.path == "/v1beta/models/gem-t:generateContent"
    assert req.headers["x-goog-api-key"] == "gk-abc"
    assert req.body["generationConfig"]["responseMimeType"] == "application/json"
    assert req.body["systemInstruction"]["parts"][0]["text"] == "SYSTEM PROMPT"
    parts = req.body["contents"][0]["parts"]
    inline = parts[0]["inlineData"]  # the SDK writes the key inside as mime_type; the API takes both
    assert (inline.get("mimeType") or inline.get("mime_type")) == "image/png"
    assert parts[1]["text"] == REQ.user
    assert req.image_bytes == IMAGE
    assert json.loads(reply.text)["label"] == "harmful"
    assert reply.model_name == "gem-t-001" and (reply.prompt_tokens, reply.completion_tokens) == (1100, 70)


def test_openai_compatible_uses_base_url_without_key(fake_llm):
    cfg = ProviderConfig(kind="openai-compatible", model="Qwen/Qwen2.5-VL-7B-Instruct", base_url=f"{fake_llm.url}/v1")
    reply = client_for(cfg).generate(REQ)
    body = fake_llm.requests[0].body
    assert body["model"] == "Qwen/Qwen2.5-VL-7B-Instruct" and body["response_format"] == {"type": "json_object"}
    assert body["temperature"] == 0 and body["max_tokens"] == 8192
    assert body["messages"][1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert reply.text


@pytest.mark.parametrize("cfg", [openai_cfg, gemini_cfg])
def test_429_is_transient_with_retry_after_and_no_sdk_retry(fake_llm, keys, cfg):
    config = cfg(fake_llm)
    fake_llm.plan(config.model, ["429:7"])
    with pytest.raises(TransientProviderError) as exc:
        client_for(config).generate(REQ)
    assert exc.value.status == 429 and exc.value.retry_after == 7
    assert len(fake_llm.requests) == 1  # the SDK did not retry on its own


@pytest.mark.parametrize("cfg", [openai_cfg, gemini_cfg])
@pytest.mark.parametrize("behaviour", ["500", "503"])
def test_5xx_is_transient(fake_llm, keys, cfg, behaviour):
    config = cfg(fake_llm)
    fake_llm.plan(config.model, [behaviour])
    with pytest.raises(TransientProviderError):
        client_for(config).generate(REQ)
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize("cfg", [openai_cfg, gemini_cfg])
def test_timeout_is_transient(fake_llm, keys, cfg):
    config = cfg(fake_llm, timeout=1)
    fake_llm.plan(config.model, ["slow:2.5"])
    start = time.monotonic()
    with pytest.raises(TransientProviderError):
        client_for(config).generate(REQ)
    assert time.monotonic() - start < 2.4


@pytest.mark.parametrize("cfg", [openai_cfg, gemini_cfg])
@pytest.mark.parametrize("behaviour", ["401", "400"])
def test_auth_and_validation_errors_are_permanent(fake_llm, keys, cfg, behaviour):
    config = cfg(fake_llm)
    fake_llm.plan(config.model, [behaviour])
    with pytest.raises(PermanentProviderError) as exc:
        client_for(config).generate(REQ)
    assert exc.value.status == int(behaviour)


def test_connection_refused_is_transient(keys):
    cfg = ProviderConfig(
        kind="openai", model="m", base_url="http://127.0.0.1:9/v1", api_key_env="T_OPENAI", timeout_seconds=1
    )
    with pytest.raises(TransientProviderError):
        client_for(cfg).generate(REQ)


def test_missing_key_variable_is_permanent_and_names_the_variable(fake_llm, monkeypatch):
    monkeypatch.delenv("T_UNSET_KEY", raising=False)
    cfg = ProviderConfig(kind="gemini", model="g", base_url=fake_llm.url, api_key_env="T_UNSET_KEY")
    with pytest.raises(PermanentProviderError, match="T_UNSET_KEY is not set"):
        client_for(cfg).generate(REQ)
    assert fake_llm.requests == []


def test_replay_reads_lines_by_item_and_model(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"source_id": "s7", "model": "m1", "reply": "first"}),
                json.dumps({"source_id": "s7", "model": "m2", "reply": {"label": "non-harmful"}}),
                json.dumps({"item_id": 8, "reply": "by id"}),
                "",
            ]
        )
    )
    assert client_for(ProviderConfig(kind="replay", model="m1", replay_path=str(path))).generate(REQ).text == "first"
    r2 = client_for(ProviderConfig(kind="replay", model="m2", replay_path=str(path))).generate(REQ)
    assert json.loads(r2.text) == {"label": "non-harmful"} and r2.model_name == "m2"
    other = CandidateRequest(system="", user="", image=b"", image_mime="image/png", item_id=8)
    assert client_for(ProviderConfig(kind="replay", model="m3", replay_path=str(path))).generate(other).text == "by id"
    missing = CandidateRequest(system="", user="", image=b"", image_mime="image/png", item_id=99)
    with pytest.raises(PermanentProviderError, match="no reply for this item"):
        client_for(ProviderConfig(kind="replay", model="m1", replay_path=str(path))).generate(missing)


def test_replay_bad_file_is_a_clear_permanent_error(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("not json\n")
    with pytest.raises(PermanentProviderError, match="line 1 is not JSON"):
        client_for(ProviderConfig(kind="replay", model="m", replay_path=str(path))).generate(REQ)
    with pytest.raises(PermanentProviderError, match="not readable"):
        client_for(ProviderConfig(kind="replay", model="m", replay_path=str(tmp_path / "none"))).generate(REQ)


def test_retry_after_parsing():
    assert parse_retry_after("12") == 12
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10
    assert parse_retry_after("garbage") is None and parse_retry_after(None) is None
    assert parse_retry_after("-5") == 0


def test_openai_compatible_uses_a_configured_key_and_refuses_a_missing_one(fake_llm, monkeypatch):
    monkeypatch.setenv("T_VLLM_KEY", "vllm-secret")
    cfg = ProviderConfig(kind="openai-compatible", model="q", base_url=f"{fake_llm.url}/v1", api_key_env="T_VLLM_KEY")
    client_for(cfg).generate(REQ)
    assert fake_llm.requests[0].headers["authorization"] == "Bearer vllm-secret"
    monkeypatch.delenv("T_VLLM_KEY")
    with pytest.raises(PermanentProviderError, match="T_VLLM_KEY is not set"):
        client_for(cfg).generate(REQ)
