from django import forms


class LexiconForm(forms.Form):
    entries = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 16, "spellcheck": "false"}),
        required=False,
        help_text="One mapping per line: variant, canonical form",
    )
    note = forms.CharField(max_length=300, required=False)


class LexiconUploadForm(forms.Form):
    file = forms.FileField(help_text="CSV with columns variant,canonical")


class SendBackForm(forms.Form):
    note = forms.CharField(max_length=2000, required=False, widget=forms.Textarea(attrs={"rows": 2}))
