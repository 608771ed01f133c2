"""Candidate test data, made through the services: providers and stored candidate replies."""

from __future__ import annotations

import json

from candidates.endpoints import replay_file_path
from candidates.models import Provider
from candidates.services import candidate_store, provider_create

PROVIDER_NAMES = ["SecretProviderAlpha", "SecretProviderBeta", "SecretProviderGamma"]
MODEL_NAMES = ["gpt-4o-hidden-model", "gemini-hidden-model", "qwen-vl-hidden-model"]


def replay_file_write(project, lines: list[dict] | str, name: str = "replay.jsonl") -> str:
    """Put a replay file into the project's replay folder (as an upload would); returns its name."""
    path = replay_file_path(project.pk, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = lines if isinstance(lines, str) else "".join(json.dumps(line) + "\n" for line in lines)
    path.write_text(text)
    return name


def candidates_create(item, replies: list[dict], *, prompt_version: str = "v1"):
    """Store one candidate per reply, each from its own provider (made through candidates.services)."""
    out = []
    for i, reply in enumerate(replies):
        provider = Provider.objects.filter(project=item.project, name=PROVIDER_NAMES[i]).first() or provider_create(
            project=item.project,
            name=PROVIDER_NAMES[i],
            kind="openai-compatible",
            model=MODEL_NAMES[i],
            base_url="http://127.0.0.1:9/v1",
        )
        out.append(
            candidate_store(
                item=item,
                provider=provider,
                prompt_version=prompt_version,
                reply_text=json.dumps({"think": f"secret reasoning {i}", **reply}),
                model_name=MODEL_NAMES[i],
                latency_ms=10,
                prompt_tokens=1,
                completion_tokens=1,
            )
        )
    return out
