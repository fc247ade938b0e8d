# syntax=docker/dockerfile:1
# runbook-bot's image: the package in a virtualenv on a slim Python, ipmitool for IPMI BMCs,
# the shipped runbooks and postmortem templates in /app (mount a directory over either to
# replace them), a non-root user, and nothing written outside /tmp and the data volume,
# so it runs with a read-only root filesystem (the Helm chart's default).
#
#   docker build -t runbook-bot .
#   docker run --rm -p 8080:8080 --read-only --tmpfs /tmp -v rb-data:/var/lib/runbook-bot runbook-bot
#
# BASE is any Debian-based image with Python 3.11+ and its venv module (the default, or a
# mirror of it).
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/runbook-bot
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY alembic ./alembic
COPY postmortem ./postmortem
COPY runbooks ./runbooks
RUN /opt/runbook-bot/bin/pip install /src \
 && /opt/runbook-bot/bin/python -m compileall -q /opt/runbook-bot

FROM ${BASE}
# ipmitool: the IPMI backend runs it (argument lists, never a shell). tini reaps serve's
# worker child and forwards signals.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ipmitool tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 runbook-bot \
 && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home \
      --shell /usr/sbin/nologin runbook-bot \
 && mkdir -p /var/lib/runbook-bot \
 && chown 10001:10001 /var/lib/runbook-bot
COPY --from=build /opt/runbook-bot /opt/runbook-bot
COPY runbooks /app/runbooks
COPY postmortem /app/postmortem
ENV PATH=/opt/runbook-bot/bin:$PATH \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    RUNBOOK_BOT_LISTEN_HOST=0.0.0.0 \
    RUNBOOK_BOT_RUNBOOKS_DIR=/app/runbooks \
    RUNBOOK_BOT_POSTMORTEM_TEMPLATES=/app/postmortem \
    RUNBOOK_BOT_DATABASE_URL=sqlite:////var/lib/runbook-bot/runbook-bot.db
WORKDIR /app
VOLUME ["/var/lib/runbook-bot"]
USER 10001:10001
EXPOSE 8080
# No curl in the image: Python asks /healthz (the liveness route) and fails on any error.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["/opt/runbook-bot/bin/python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('RUNBOOK_BOT_LISTEN_PORT', '8080') + '/healthz', timeout=4)"]
ENTRYPOINT ["/usr/bin/tini", "--", "runbook-bot"]
CMD ["serve"]
