"""Filter form of the agreement report (views and the REST API share it) and the audit form."""

from __future__ import annotations

from django import forms

from quality import agreement
from quality.services import DEFAULT_AUDIT_SIZE, MAX_AUDIT_SIZE

MAX_SPAN_DAYS = 3660


class ReportFilterForm(forms.Form):
    source_dataset = forms.ChoiceField(required=False, label="Source dataset")
    language = forms.ChoiceField(required=False)
    category = forms.ChoiceField(
        required=False, label="Category", help_text="Items where at least one annotator chose this value."
    )
    date_from = forms.DateField(required=False, label="Completed from", widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(required=False, label="Completed to", widget=forms.DateInput(attrs={"type": "date"}))
    scope = forms.ChoiceField(
        required=False,
        label="Target-field items",
        choices=[
            ("both", "every annotator gave a target (default)"),
            ("either", "at least one annotator gave a target"),
            ("all", "all items"),
        ],
    )

    def __init__(self, data=None, *, options: dict, **kwargs):
        super().__init__(data, **kwargs)
        self.fields["source_dataset"].choices = [("", "all")] + [(d, d) for d in options["source_datasets"]]
        self.fields["language"].choices = [("", "all")] + [(x, x) for x in options["languages"]]
        self.fields["category"].choices = [("", "all")] + [(group, choices) for group, choices in options["categories"]]

    def clean(self):
        data = super().clean()
        start, end = data.get("date_from"), data.get("date_to")
        if start and end and start > end:
            raise forms.ValidationError("The start date is after the end date.")
        if start and end and (end - start).days > MAX_SPAN_DAYS:
            raise forms.ValidationError("The date range is longer than ten years.")
        return data

    def filters(self) -> dict:
        """Canonical filter dict (strings); only valid after is_valid()."""
        d = self.cleaned_data
        return {
            "source_dataset": d.get("source_dataset") or "",
            "language": d.get("language") or "",
            "category": d.get("category") or "",
            "date_from": d["date_from"].isoformat() if d.get("date_from") else "",
            "date_to": d["date_to"].isoformat() if d.get("date_to") else "",
            "scope": d.get("scope") or agreement.DEFAULT_SCOPE,
        }


class AuditCreateForm(forms.Form):
    size = forms.IntegerField(min_value=1, max_value=MAX_AUDIT_SIZE, initial=DEFAULT_AUDIT_SIZE, label="Sample size n")
    seed = forms.IntegerField(
        required=False, min_value=0, max_value=2**62, help_text="Leave empty for a random seed (it is stored)."
    )
    include_untargeted = forms.BooleanField(
        required=False, label="Also sample gold items without a target (e.g. non-harmful)"
    )
