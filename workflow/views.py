"""Pages of steps that span annotation and adjudication (CONVENTIONS "Layers run one way")."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.selectors import annotation_get_for_annotator
from core.views import service_errors
from projects.access import project_get_for_user
from projects.models import Role
from workflow.services import item_flag


@login_required
@require_POST
@service_errors(back=lambda request, slug, item_id: reverse("annotate_item", args=[slug, item_id]))
def annotate_flag(request, slug, item_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.ANNOTATOR])
    annotation = annotation_get_for_annotator(user=request.user, project=project, item_id=item_id)
    item_flag(
        annotator=request.user,
        item=annotation.item,
        reason=request.POST.get("reason", ""),
        note=request.POST.get("note", ""),
    )
    messages.info(request, "Thank you: the item is flagged and leaves the dataset with your reason.")
    return redirect("annotate_home", slug=project.slug)
