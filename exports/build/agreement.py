"""agreement.json of a release: the pre-adjudication agreement report over exactly the items
whose annotations the release ships (issue 16: a figure counting an item the files do not hold
cannot be recomputed by anyone).

Same figures, rules and bootstrap as the quality app's report (quality.agreement), on the
report's units restricted to released items. ``annotations.jsonl`` marks the compared records
(``agreement_slot``), so ``exports/tests/test_recompute.py`` recomputes every figure from the
files alone.
"""

from __future__ import annotations

from adjudication.services import lexicon_current
from exports.selectors import SplitPlan
from projects.models import Project
from quality import agreement
from quality.reports import DEFAULT_FILTERS, report_table_all_fields


def release_agreement(*, project: Project, plan: SplitPlan) -> dict:
    schema = project.get_schema()
    lexicon_version, lexicon = lexicon_current(project=project)
    # Columns, not per-record dicts (quality.reports.report_table), of released items only;
    # each field's column is let go once its figures are computed, the rest before the bootstrap.
    units = report_table_all_fields(project=project, only_items=plan.released_ids, times=False)
    scope = DEFAULT_FILTERS["scope"]
    max_slots = agreement.slot_count(units)
    results = agreement.agreement_figures(schema, units, lexicon=lexicon, scope=scope, release_table=True)
    return {
        "report_version": agreement.REPORT_VERSION,
        "schema_version": project.schema_version,
        "lexicon_version": lexicon_version,
        "annotators_per_item": project.annotators_per_item,
        "scope": scope,
        "scope_description": agreement.SCOPES[scope],
        "n_items": len(units),
        "n_annotations": int(units.counts.sum()),
        "max_slots": max_slots,
        "method": {
            "raters": "two annotations per item: the two annotations; more: annotator pairs (people) over the items "
            "both annotated, then averaged (AHA-Memes 3.4), plus Krippendorff's alpha",
            "items": "released items with two or more submitted annotations; the first annotators_per_item of each, "
            "by first submission: the records of annotations.jsonl whose agreement_slot is set",
            "bootstrap": agreement.method_text(),
            "resamples": agreement.RESAMPLES,
            "entity_lexicon": "lexicon.json (the project lexicon frozen in this release)",
            "recompute": "every value is recomputable from annotations.jsonl, lexicon.json and manifest.json's schema",
        },
        "headline": agreement.headline(results),
        "fields": [agreement.field_result_dict(r, scope) for r in results],
    }
