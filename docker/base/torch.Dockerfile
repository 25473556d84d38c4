# The local stand-in for pytorch/pytorch:*-runtime: torch from PyPI on the local Python image.
# PyPI's Linux wheel is the CUDA build (it runs on CPU too); the CA bundle (scripts/docker.sh)
# lets pip through a TLS-intercepting proxy.
ARG BASE_IMAGE=vsparta-local/python:3.11
FROM ${BASE_IMAGE}
COPY ca-bundle.pem /etc/vsparta-build/ca-bundle.pem
RUN if [ -s /etc/vsparta-build/ca-bundle.pem ]; then export PIP_CERT=/etc/vsparta-build/ca-bundle.pem; fi \
 && pip install --no-cache-dir "torch>=2.1" \
 && python -c "import torch; print('torch', torch.__version__)"
