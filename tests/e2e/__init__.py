"""Browser tests: the real app process (`manage.py serve`, scripted engine) driven by Chromium."""
