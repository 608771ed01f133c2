"""Included once from concord/urls.py: the pages under p/<slug>/quality/ and, under api/, the REST endpoints."""

from django.urls import include, path

from quality import apis, views

api_urlpatterns = [
    path("projects/<slug:slug>/quality/agreement/", apis.AgreementReportApi.as_view(), name="api_quality_agreement"),
    path(
        "projects/<slug:slug>/quality/agreement/jobs/",
        apis.AgreementJobStartApi.as_view(),
        name="api_quality_agreement_job_start",
    ),
    path(
        "projects/<slug:slug>/quality/agreement/jobs/<int:report_id>/",
        apis.AgreementJobApi.as_view(),
        name="api_quality_agreement_job",
    ),
    path("projects/<slug:slug>/quality/audits/", apis.AuditListApi.as_view(), name="api_quality_audits"),
    path("projects/<slug:slug>/quality/audits/create/", apis.AuditCreateApi.as_view(), name="api_quality_audit_create"),
    path(
        "projects/<slug:slug>/quality/audits/<int:audit_id>/", apis.AuditReportApi.as_view(), name="api_quality_audit"
    ),
    path("projects/<slug:slug>/quality/anchoring/", apis.AnchoringApi.as_view(), name="api_quality_anchoring"),
]

urlpatterns = [
    path("p/<slug:slug>/quality/", views.dashboard, name="quality_dashboard"),
    path("p/<slug:slug>/quality/agreement/", views.agreement_page, name="quality_agreement"),
    path("p/<slug:slug>/quality/agreement.json", views.agreement_json, name="quality_agreement_json"),
    path("p/<slug:slug>/quality/agreement.csv", views.agreement_csv, name="quality_agreement_csv"),
    path("p/<slug:slug>/quality/agreement/compute", views.agreement_compute, name="quality_agreement_compute"),
    path("p/<slug:slug>/quality/audits/", views.audits_page, name="quality_audits"),
    path("p/<slug:slug>/quality/audits/<int:audit_id>/", views.audit_page, name="quality_audit"),
    path("p/<slug:slug>/quality/audits/<int:audit_id>.json", views.audit_json, name="quality_audit_json"),
    path("p/<slug:slug>/quality/audits/<int:audit_id>.csv", views.audit_csv, name="quality_audit_csv"),
    path("p/<slug:slug>/quality/anchoring/", views.anchoring_page, name="quality_anchoring"),
    path("p/<slug:slug>/quality/anchoring.json", views.anchoring_json, name="quality_anchoring_json"),
    path("p/<slug:slug>/quality/anchoring.csv", views.anchoring_csv, name="quality_anchoring_csv"),
    path("api/", include(api_urlpatterns)),
]
