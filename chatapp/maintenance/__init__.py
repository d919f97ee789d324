"""Housekeeping jobs that Celery beat runs on a schedule (CELERY_BEAT_SCHEDULE)."""
