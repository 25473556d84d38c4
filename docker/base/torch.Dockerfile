# The local stand-in for pytorch/pytorch:*-runtime: torch from PyPI on the local Python image.
# PyPI's Linux wheel is the CUDA build: torch 1.2 GB + nvidia-* 3.0 GB + triton 1.0 GB, 5.8 GB in
# all, ~170 s to build here. It runs on the CPU. Measured alternatives: the CPU-only wheel index
# (download.pytorch.org) is not reachable from these machines, and the CUDA wheel installed
# without its nvidia-* dependencies (1.4 GB) does not import (libcudart.so.13 missing), so the
# whole build it is. The CA bundle (scripts/docker.sh) lets pip through a TLS-intercepting proxy.
ARG BASE_IMAGE=vsparta-local/python:3.11
FROM ${BASE_IMAGE}
COPY ca-bundle.pem /etc/vsparta-build/ca-bundle.pem
RUN if [ -s /etc/vsparta-build/ca-bundle.pem ]; then export PIP_CERT=/etc/vsparta-build/ca-bundle.pem; fi \
 && pip install --no-cache-dir "torch>=2.1" \
 && python -c "import torch; print('torch', torch.__version__)"
