from __future__ import annotations

from django import forms

from candidates.models import ProviderKind


class ProviderForm(forms.Form):
    """Field shapes only; the rules (key variable name, base URL per kind...) live in the service."""

    name = forms.CharField(max_length=80, help_text="Shown to leads and researchers only.")
    kind = forms.ChoiceField(choices=ProviderKind.choices)
    model = forms.CharField(max_length=200, help_text="e.g. gpt-4o, gemini-2.5-flash, Qwen/Qwen2.5-VL-72B-Instruct")
    base_url = forms.CharField(
        max_length=500,
        required=False,
        label="Base URL",
        help_text="Required for OpenAI-compatible servers (e.g. http://gpu-host:8000/v1).",
    )
    api_key_env = forms.CharField(
        max_length=100,
        required=False,
        label="API key environment variable",
        help_text="The NAME of the variable (e.g. OPENAI_API_KEY), never the key.",
    )
    replay_file = forms.CharField(
        max_length=100,
        required=False,
        label="Replay file (JSONL)",
        help_text="Replay providers only: the name of a file of this project (or upload one below).",
    )
    replay_upload = forms.FileField(
        required=False,
        label="Upload a replay file",
        help_text='JSONL, one {"source_id" | "item_id" | "import_key", "reply"} per line; stored for this project.',
    )
    requests_per_minute = forms.IntegerField(min_value=1, max_value=100_000, initial=60)
    timeout_seconds = forms.FloatField(min_value=1, max_value=300, initial=60, label="Timeout (seconds)")
    enabled = forms.BooleanField(required=False, initial=True)


class ItemSelectionForm(forms.Form):
    item_ids = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Item ids (optional)",
        help_text="Leave empty for every item in stage “new”; or list ids separated by commas or spaces.",
    )
