"""Study test data: a staged project whose first stage writes a reference explanation with its
language and domain (the shape of the vikr preset's stage 1), made through the services."""

from __future__ import annotations

from annotation.factories import items_open, ready
from annotation.services import assignment_claim_next
from projects.factories import items_create, project_with_members
from projects.services import project_schema_update, project_settings_save
from workflow.services import annotation_submit

LANGUAGES = ["Chinese", "English"]
DOMAINS = ["ACG", "Cross-domain", "Daily life", "Movies and TV", "Public life"]

SCHEMA = {
    "fields": [
        {"name": "explanation", "type": "text", "label": "Reference explanation", "required": True},
        {"name": "language", "type": "choice", "label": "Language", "choices": LANGUAGES, "required": True},
        {"name": "domain", "type": "choice", "label": "Domain", "choices": DOMAINS, "required": True},
        {"name": "summary", "type": "text", "label": "Summary", "required": True},
    ]
}
WORKFLOW = [
    {"name": "reference", "fields": ["explanation", "language", "domain"], "annotators": 1, "gold": "references"},
    {
        "name": "summary",
        "fields": ["summary"],
        "annotators": 1,
        "gold": "references",
        "show_stages": ["reference"],
        "exclude_workers_of": ["reference"],
        "workers": ["summarist"],
    },
]


def reference_text(i: int) -> str:
    return f"Reference {i}: the cat stands for the poster's boss, a joke about Monday meetings"


def staged_project(slug: str = "st", **roles):
    project = project_with_members(slug, preset="custom", **roles)
    project = project_schema_update(project=project, schema=SCHEMA, in_place=True)
    return project_settings_save(project=project, settings={"workflow": WORKFLOW})


def references_write(project, writers, folder, strata: list[tuple[str, str]]):
    """One item per (language, domain) in ``strata``; each reference written by the writers in
    turn (the i-th claim goes to writer i % len(writers)). Returns the items and {item_id: writer}."""
    items = items_create(project, folder, len(strata))
    items_open(items)
    for w in writers:
        ready(w, project)
    written = {}
    for i in range(len(items)):
        writer = writers[i % len(writers)]
        result = assignment_claim_next(annotator=writer, project=project)
        a = result.annotation
        assert a is not None and a.stage == 0, result.outcome
        language, domain = strata[i]
        values = {"explanation": reference_text(a.item_id), "language": language, "domain": domain}
        annotation_submit(annotator=writer, item=a.item, values=values, version=a.version)
        written[a.item_id] = writer
    return items, written
