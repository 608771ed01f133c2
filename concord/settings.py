"""Concord settings, read from the environment (see concord/env.py and README "Configuration").

Embedded default: SQLite in var/, Celery over kombu's filesystem transport (no server needed).
DATABASE_URL / REDIS_URL switch to PostgreSQL and Redis.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from concord.env import env_bool, env_int, env_list, env_str, secret_key_from_file

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("CONCORD_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
# CONCORD_PRODUCTION turns on every HTTPS-only protection that `check --deploy` asks for.
PRODUCTION = env_bool("CONCORD_PRODUCTION", False)

SECRET_KEY = env_str("SECRET_KEY") or secret_key_from_file(VAR_DIR / "secret_key")
if len(SECRET_KEY) < 50:
    raise ImproperlyConfigured("SECRET_KEY must be at least 50 characters long")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "axes",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "core",
    "projects",
    "candidates",
    "annotation",
    "adjudication",
    "workflow",
    "quality",
    "studies",
    "exports",
    "evaluation",
    "demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "concord.middleware.ContentSecurityPolicyMiddleware",
    # Last, as django-axes asks: turns a locked-out login into the lockout page (concord.auth).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "concord.urls"
WSGI_APPLICATION = "concord.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'concord.sqlite3'}"),
        conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL + a busy timeout: the web server and the Celery worker write the same file.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Failed logins are limited per account and per address (concord/auth.py). The address is
# REMOTE_ADDR: behind a reverse proxy that is the proxy's, so each address limit then counts
# every client together (the per-account limit still holds).
AUTHENTICATION_BACKENDS = ["concord.auth.LoginRateLimitBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("CONCORD_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("CONCORD_LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_LOCKOUT_CALLABLE = "concord.auth.lockout_response"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
# Uploaded images are never served by a static/media URL: only through a permission-checked
# view with a fixed image content type (exports.views.item_image, rule in exports.image_access).
MEDIA_ROOT = Path(env_str("CONCORD_MEDIA_ROOT", str(VAR_DIR / "media")))
# Nothing routes this prefix; it exists because Django's test server expects a media URL.
MEDIA_URL = "/_media-not-served/"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Uploads: hostile until proven otherwise.
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
CONCORD_MAX_UPLOAD_BYTES = env_int("CONCORD_MAX_UPLOAD_BYTES", 2 * 1024**3, minimum=1)
CONCORD_MAX_IMAGE_BYTES = env_int("CONCORD_MAX_IMAGE_BYTES", 20 * 1024**2, minimum=1)
CONCORD_MAX_IMAGE_PIXELS = env_int("CONCORD_MAX_IMAGE_PIXELS", 40_000_000, minimum=1)
# Manifests are streamed; each of these refuses a row (or the rest of the manifest) with a reason.
CONCORD_IMPORT_MAX_ROWS = env_int("CONCORD_IMPORT_MAX_ROWS", 1_000_000, minimum=1)
CONCORD_IMPORT_MAX_ROW_BYTES = env_int("CONCORD_IMPORT_MAX_ROW_BYTES", 64 * 1024, minimum=1024)
CONCORD_IMPORT_MAX_METADATA_BYTES = env_int("CONCORD_IMPORT_MAX_METADATA_BYTES", 16 * 1024, minimum=2)
CONCORD_MAX_TEXT_LENGTH = env_int("CONCORD_MAX_TEXT_LENGTH", 10_000, minimum=1)
# Provider base URLs on this machine or a private network (a self-hosted vLLM) are refused
# unless allowed here (candidates.endpoints): without it, a lead could aim requests at Redis.
CONCORD_ALLOW_PRIVATE_PROVIDER_URLS = env_bool("CONCORD_ALLOW_PRIVATE_PROVIDER_URLS", False)

REDIS_URL = env_str("REDIS_URL")
BROKER_DIR = VAR_DIR / "broker"
# Under pytest-xdist (make test) each test process gets its own Redis database, as it gets its
# own test database: cache keys hold primary keys, and a test may flush its database. The
# result goes into the environment once, so the worker processes a test starts inherit it as is.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if REDIS_URL and _XDIST_WORKER.startswith("gw") and not os.environ.get("CONCORD_XDIST_REDIS"):
    _parts = urlsplit(REDIS_URL)
    _db = (int(_parts.path.strip("/") or 0) + 1 + int(_XDIST_WORKER[2:])) % 16
    REDIS_URL = urlunsplit(_parts._replace(path=f"/{_db}"))
    os.environ["REDIS_URL"] = os.environ["CONCORD_XDIST_REDIS"] = REDIS_URL
    os.environ.pop("CELERY_BROKER_URL", None)

if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }

# Sessions are read from the cache (Redis, or the file cache without it) and written through to
# the database: a request costs no session query, and a session outlives a cache flush.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

# Celery (read by concord/celery.py with namespace="CELERY").
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL or "filesystem://")
if CELERY_BROKER_URL == "filesystem://":
    for sub in ("in", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "in"),
        "data_folder_out": str(BROKER_DIR / "in"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
else:
    # Redelivery of an unacknowledged message waits this long: longer than any task's hard time
    # limit, so a running job is never delivered twice. A killed worker's job does not wait for
    # it: its heartbeat goes stale and the sweeper re-sends it (README "Jobs").
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 7200, minimum=60)}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 600, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 540, minimum=1)
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Liveness of a running job (core.jobs): a job whose heartbeat is older than the lease lost its
# worker and is taken over. Jobs renew it at every progress report (at least every few seconds).
CONCORD_JOB_LEASE_SECONDS = env_int("CONCORD_JOB_LEASE_SECONDS", 120, minimum=1)
CONCORD_JOB_SWEEP_SECONDS = env_int("CONCORD_JOB_SWEEP_SECONDS", 30, minimum=1)
# A release build writes its second half in a forked child on another core (core.forked;
# PostgreSQL, outside a transaction). False: one process.
JOB_PARTS_IN_PARALLEL = env_bool("CONCORD_JOB_PARTS_IN_PARALLEL", True)
CELERY_BEAT_SCHEDULE = {
    "sweep-jobs": {"task": "core.sweep_jobs", "schedule": float(CONCORD_JOB_SWEEP_SECONDS)},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "core.pagination.StrictLimitOffsetPagination",
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "core.apis.exception_handler",
    "PAGE_SIZE": 100,
    "DEFAULT_THROTTLE_RATES": {"user": "10000/hour"},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Concord API",
    "DESCRIPTION": "Projects, imports, candidate jobs and versioned dataset releases.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Every operation lists the refusals it can answer (tests/security/test_schemathesis.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "concord.openapi.document_error_responses",
    ],
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from a meta tag, not the cookie
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
