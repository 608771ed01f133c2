"""HTML pages (included at "" from concord/urls.py). The REST endpoints are in exports/api_urls.py."""

from django.urls import path

from exports import views

urlpatterns = [
    path("p/<slug:slug>/duplicates/", views.duplicates_page, name="duplicates_page"),
    path("p/<slug:slug>/duplicates/scan/", views.duplicates_scan, name="duplicates_scan"),
    path("p/<slug:slug>/duplicates/<int:pair_id>/review/", views.duplicate_review, name="duplicate_review"),
    path("p/<slug:slug>/splits/", views.splits_page, name="splits_page"),
    path("p/<slug:slug>/releases/", views.releases_page, name="releases_page"),
    path("p/<slug:slug>/releases/build/", views.release_build_start, name="release_build_start"),
    path("p/<slug:slug>/releases/diff/", views.release_diff_page, name="release_diff_page"),
    path("p/<slug:slug>/releases/settings/", views.release_settings_save, name="release_settings_save"),
    path("p/<slug:slug>/releases/v<int:number>/push/", views.release_push_start, name="release_push_start"),
    path("p/<slug:slug>/releases/v<int:number>/", views.release_page, name="release_page"),
    path("account/api-token/", views.api_token_page, name="api_token"),
    # Item images (a projects URL): the access rule needs every stage's data (exports.image_access).
    path("p/<slug:slug>/items/<int:item_id>/image", views.item_image, name="item_image"),
    path("p/<slug:slug>/items/<int:item_id>/image/<slug:variant>", views.item_image, name="item_image_variant"),
]
