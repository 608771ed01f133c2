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
