# The local stand-in for python:3.11-slim: Debian bookworm's Python 3.11 in a venv that is first
# on PATH, so `python` and `pip install` behave as in the official image (Debian's own python3
# refuses system-wide pip installs, PEP 668).
ARG BASE_IMAGE=vsparta-local/debian:bookworm
FROM ${BASE_IMAGE}
RUN python3 -m venv /opt/python && /opt/python/bin/python -m pip --version
ENV PATH=/opt/python/bin:$PATH PYTHONUNBUFFERED=1
CMD ["python3"]
