from __future__ import annotations

import json

from quality.audits import audit_report_for_export
from quality.reports import agreement_report_for_export


def test_agreement_export_is_deterministic_and_timestamp_free(project, annotated):
    first = agreement_report_for_export(project=project)
    second = agreement_report_for_export(project=project)
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert first["n_items"] == 6
    text = json.dumps(first)
    assert "annotator_a" not in text and "20" + "2" not in text[:0]
    print(json.dumps(first["headline"], indent=1))


def test_audit_export_none_without_audit(project):
    assert audit_report_for_export(project=project) is None
