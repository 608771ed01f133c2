FROM python:3.11-slim
# ORT_DISABLE_TELEMETRY: onnxruntime (OCR) would otherwise write and upload telemetry events.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 CONCORD_VAR_DIR=/data ORT_DISABLE_TELEMETRY=1
WORKDIR /app
# Chinese glyphs (MemeBench's Chinese memes): demo images and server-side rendering use them.
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends fonts-wqy-microhei \
    && rm -rf /var/lib/apt/lists/*
# The runtime lock only (no test tools), with hashes; --no-deps keeps the headless OpenCV the only cv2.
COPY requirements/base.txt requirements.txt
RUN pip install --no-cache-dir --no-deps --require-hashes -r requirements.txt \
    && python -c "import cv2, django, celery"
COPY . .
RUN SECRET_KEY=collectstatic-only-not-a-real-key-0000000000000000000000000 python manage.py collectstatic --no-input -v0
RUN useradd --create-home concord && mkdir -p /data && chown concord /data
USER concord
EXPOSE 8000
CMD ["gunicorn", "concord.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "2"]
