from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from projects.urls import api_urlpatterns as project_api

api = [
    *project_api,
    path("schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api_schema"), name="api_docs"),
    path("", include("exports.api_urls")),
    path("", include("evaluation.api_urls")),
]

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path(
        "accounts/set-password/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(
            template_name="registration/set_password.html", success_url="/accounts/set-password/done/"
        ),
        name="set_password",
    ),
    path(
        "accounts/set-password/done/",
        auth_views.PasswordResetCompleteView.as_view(template_name="registration/set_password_done.html"),
        name="set_password_done",
    ),
    path("admin/", admin.site.urls),
    path("api/", include(api)),
    path("", include("annotation.urls")),
    path("", include("workflow.urls")),
    path("", include("adjudication.urls")),
    path("", include("projects.urls")),
    path("", include("exports.urls")),
    path("", include("candidates.urls")),
    path("", include("quality.urls")),
    path("", include("studies.urls")),
    path("", include("evaluation.urls")),
]
