# syntax=docker/dockerfile:1
# podpin node agent image.
#
#   docker build -t podpin:0.2.0 .                                             # on the pinned public Python image
#   podman build --build-arg BASE=localhost/podpin-base:bookworm -t podpin .   # on a base made by scripts/image-setup
#
# BASE is any Debian-like image with a python3 (>= 3.11, as pyproject's requires-python) that has its venv module,
# and either libudev1 or apt. The default is the pinned public image; scripts/image-setup makes one from Debian's
# own packages (debootstrap, Python from Debian) for machines that reach no container registry.
#
# Two stages on the same base: `build` turns this repository (pyproject.toml + agent/) into a wheel and installs it
# with its dependencies into the virtualenv /opt/podpin, then removes pip, setuptools and wheel from it; the final
# stage copies only that virtualenv. Neither the sources, the wheels nor any build tool end up in the image, and the
# interpreter that ran the build is the one the virtualenv points at.
#
# The agent runs as uid 0 on purpose (the DaemonSet drops every capability): the cgroup files it writes are
# root-owned 0644, and owner permission is all it needs.

ARG BASE=python:3.11.14-slim-trixie

FROM ${BASE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

FROM base AS build
# PIP_INDEX_URL: a package index to build from instead of PyPI (a mirror; tests/deploy/test_image.py serves one on
# the loopback). Unset by default: it is only an environment variable of this stage, never of the image.
ARG PIP_INDEX_URL
WORKDIR /src
# .dockerignore lets only pyproject.toml, README.md, LICENSE and agent/ into the context.
COPY . .
RUN python3 -m venv /opt/podpin \
    && /opt/podpin/bin/pip wheel --wheel-dir /wheels . \
    && /opt/podpin/bin/pip install --no-index --only-binary=:all: --find-links=/wheels /wheels/podpin-*.whl \
    && /opt/podpin/bin/pip uninstall -y setuptools wheel pip

FROM base AS runtime
# pyudev loads libudev at run time (CPU hotplug and PCI device events) through ctypes.util.find_library, asked the
# same way here: it is installed only when the base lacks it. systemd 257 is the default base's (trixie's) for its
# whole life, so the pin holds across point releases. The base's own packaging tools go: the agent installs nothing.
RUN if ! python3 -c 'import ctypes.util, sys; sys.exit(ctypes.util.find_library("udev") is None)'; then \
        apt-get update \
        && apt-get install -y --no-install-recommends libudev1=257.* \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && if python3 -m pip --version >/dev/null 2>&1; then python3 -m pip uninstall -y setuptools wheel pip; fi
COPY --from=build /opt/podpin /opt/podpin
ENV PATH=/opt/podpin/bin:$PATH
EXPOSE 9363
ENTRYPOINT ["podpin"]
CMD ["run"]
