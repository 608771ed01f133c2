from __future__ import annotations

from candidates.tests import conftest as _candidates

# The fake LLM server and its API keys (candidates.tests.conftest), for the model stages.
fake_llm = _candidates.fake_llm
api_keys = _candidates.api_keys
