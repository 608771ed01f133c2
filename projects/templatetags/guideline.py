from django import template

from projects.guideline import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text):
    """Markdown -> HTML without raw HTML (projects.guideline)."""
    return render_markdown(text)
