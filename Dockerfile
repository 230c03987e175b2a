# kcoord's container image.
#
# The base is an argument so that the image builds without a registry too: any image with a
# python3 (>= 3.11) that can make a venv will do, e.g. a Debian base made with mmdebstrap
# (tests/container/ builds one). Both stages must use the same base: the venv copied into the
# runtime stage points at the base's interpreter.
ARG BASE=python:3.11-slim

FROM ${BASE} AS builder
# A build without an index installs from a mounted wheelhouse:
#   --build-arg PIP_NO_INDEX=1 --build-arg PIP_FIND_LINKS=/wheelhouse
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN python3 -m venv /opt/kcoord \
    && /opt/kcoord/bin/pip install --no-cache-dir --disable-pip-version-check . \
    && /opt/kcoord/bin/kcoord config show > /dev/null

FROM ${BASE}
RUN groupadd --gid 10001 kcoord \
    && useradd --no-log-init --uid 10001 --gid 10001 \
        --home-dir /var/lib/kcoord --shell /usr/sbin/nologin kcoord \
    && mkdir -p /var/lib/kcoord \
    && chown kcoord:kcoord /var/lib/kcoord
COPY --from=builder /opt/kcoord /opt/kcoord
# Settings come from the environment (KCOORD_<setting>); flags given to `kcoord serve` win.
# Clients outside the container need KCOORD_ADVERTISED_LISTENERS=<reachable host>:9092.
ENV PATH=/opt/kcoord/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    KCOORD_LISTENERS=0.0.0.0:9092 \
    KCOORD_KCOORD_METRICS_LISTEN=0.0.0.0:9644 \
    KCOORD_LOG_DIRS=/var/lib/kcoord
USER 10001:10001
WORKDIR /var/lib/kcoord
VOLUME ["/var/lib/kcoord"]
EXPOSE 9092 9644
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["kcoord", "health", "--bootstrap", "127.0.0.1:9092"]
CMD ["kcoord", "serve"]
