from django import forms


class ImportUploadForm(forms.Form):
    file = forms.FileField(help_text="A .zip with the images and a manifest.jsonl or manifest.csv")

    def clean_file(self):
        f = self.cleaned_data["file"]
        if not f.name.lower().endswith(".zip"):
            raise forms.ValidationError("Upload a .zip file holding the images and a manifest.")
        return f


class VariantUploadForm(forms.Form):
    item = forms.IntegerField(min_value=1, label="Item id", help_text="The item whose text-free image this is.")
    file = forms.FileField(
        label="Text-free image", help_text="PNG, JPEG, GIF or WEBP of the same size as the item's image."
    )


class ProjectCreateForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="Shown to everyone in the project.")
    slug = forms.CharField(
        max_length=80,
        required=False,
        help_text="The project's name in URLs and the REST API: lower-case letters, digits and hyphens "
        "(left empty: made from the name).",
    )
    preset = forms.ChoiceField(required=False, widget=forms.RadioSelect)
    copy_from = forms.ChoiceField(
        required=False,
        label="Or copy settings from",
        help_text="Schema, guideline, workflow and study settings of a project you lead (no items, members or work).",
    )

    def __init__(self, *args, presets: dict, led_projects, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["preset"].choices = [(k, v.get("label", k)) for k, v in presets.items()]
        self.fields["copy_from"].choices = [("", "— none: use the preset —")] + [(p.slug, p.name) for p in led_projects]


class GuidelineForm(forms.Form):
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 24, "class": "mono"}),
        max_length=100_000,
        strip=False,
        help_text="Markdown: # headings, - lists, **bold**, [links](https://...). Raw HTML is shown as text.",
    )
    note = forms.CharField(
        max_length=300,
        required=False,
        help_text="What changed (annotators see it with the “guideline changed” notice).",
    )
    version = forms.IntegerField(widget=forms.HiddenInput)


class InvitationAcceptForm(forms.Form):
    username = forms.CharField(max_length=150)
    password = forms.CharField(widget=forms.PasswordInput, strip=False)
    password2 = forms.CharField(widget=forms.PasswordInput, strip=False, label="Password again")
