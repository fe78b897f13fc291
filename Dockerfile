# syntax=docker/dockerfile:1
# podpin node agent image.
#
#   docker build -t podpin:0.1.0 .
#
# Two stages: `build` turns this repository (pyproject.toml + agent/) into a wheel and collects the wheels of its
# dependencies; the final stage installs those wheels from a bind mount, so neither the sources, the wheels nor
# any build tool (pip's wheel building, setuptools, wheel, a compiler) end up in a layer of the image.
#
# The agent runs as uid 0 on purpose (the DaemonSet drops every capability): the cgroup files it writes are
# root-owned 0644, and owner permission is all it needs.

# One pinned base for both stages, so the interpreter that builds the wheels is the one that runs them.
FROM python:3.11.14-slim-trixie AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

FROM base AS build
WORKDIR /src
# .dockerignore lets only pyproject.toml, README.md, LICENSE and agent/ into the context.
COPY . .
RUN pip wheel --wheel-dir /wheels .

FROM base AS runtime
# pyudev loads libudev at run time (CPU hotplug and PCI device events); the slim base is not bound to ship it.
# systemd 257 is trixie's for its whole life, so the pin holds across point releases.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libudev1=257.* \
    && rm -rf /var/lib/apt/lists/*
# Install podpin and its dependencies only from the wheels built above (no index, binaries only), then remove the
# packaging tools the base image ships: the running agent never installs anything.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --only-binary=:all: --find-links=/wheels /wheels/podpin-*.whl \
    && python -m pip uninstall -y setuptools wheel pip
EXPOSE 9363
ENTRYPOINT ["podpin"]
CMD ["run"]
