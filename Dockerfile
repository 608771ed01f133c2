FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 CONCORD_VAR_DIR=/data
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
RUN SECRET_KEY=collectstatic-only-not-a-real-key-0000000000000000000000000 python manage.py collectstatic --no-input -v0
RUN useradd --create-home concord && mkdir -p /data && chown concord /data
USER concord
EXPOSE 8000
CMD ["gunicorn", "concord.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]
