# syntax=docker/dockerfile:1
# planner-arm: build wheels in one stage, install only those wheels in a slim runtime stage.
#   docker build -t octollm/planner-arm:0.1.0 .
#   docker run --rm -p 127.0.0.1:8080:8080 -e OPENAI_API_KEY octollm/planner-arm:0.1.0
# Without OPENAI_API_KEY (and without LLM_BASE_URL) the service serves the rule-based planner.
# It listens on 0.0.0.0 in the container: published beyond the host's loopback, give it
# PLANNER_API_KEYS too (without keys it logs serving_without_keys and /health says so).

FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# README.md is the package's readme (pyproject.toml names it), so the build needs it.
COPY pyproject.toml constraints.txt README.md ./
COPY src ./src
# The project with the service (the `server` extra) and every dependency at the versions in
# constraints.txt, as wheels.
RUN pip wheel --no-cache-dir -c constraints.txt ".[server]" -w /wheels

FROM python:3.11-slim-bookworm AS runtime
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="planner-arm" \
      org.opencontainers.image.description="Turns a goal into an executable, validated plan of arm steps" \
      org.opencontainers.image.version="${VERSION}"
ENV HOST=0.0.0.0 \
    PORT=8080 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PLANNER_CONFIG=/etc/planner-arm/planner-config.yaml
# A fixed uid/gid, so the Kubernetes securityContext (runAsUser/runAsGroup/fsGroup) can match it.
RUN groupadd --system --gid 10001 planner \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin planner
WORKDIR /app
# Only the wheels built above, nothing from an index; the wheels are bind-mounted, so they
# take no layer. No compiler, no curl, no pip cache in this image.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index /wheels/*.whl
# The default configuration; a file mounted at the same path (a ConfigMap) replaces it.
COPY planner-config.yaml /etc/planner-arm/planner-config.yaml
USER 10001:10001
EXPOSE 8080
# The slim image has no curl: the check uses the image's own Python.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/health', timeout=2).status == 200 else 1)"]
ENTRYPOINT ["planner-arm", "serve", "--host", "0.0.0.0", "--port", "8080"]
