# dv-mirror's code location as an image: Python 3.11, Java 17, the package (not editable) at the versions
# requirements.lock pins, and the JVM jars of jvm/pom.xml in /opt/dvmirror/jars (DVMIRROR_JARS).
#
#   docker build -t dv-mirror .
#   docker run -p 4000:4000 -v /srv/dvmirror:/srv/dvmirror -e DVMIRROR_SOURCES=/srv/dvmirror/sources.yaml dv-mirror
#
# The default command serves the Dagster definitions over gRPC on port 4000 (a workspace.yaml entry
# `grpc_server: {host: ..., port: 4000, location_name: dv_mirror}`); a Dagster+ agent supplies its own
# command. `docker run dv-mirror dvmirror sync ...` runs the CLI instead.

# --- the jars: Maven on JDK 17 (the same commands as `make jars` and `make jars-s3`) ----------------------
FROM maven:3.9-eclipse-temurin-17 AS jars
# S3 support for Spark (jvm/s3/pom.xml, ~700 MB) in /opt/dvmirror/jars/s3; `--build-arg S3_JARS=false`
# leaves it out (a sync that needs S3 then says so).
ARG S3_JARS=true
WORKDIR /build
COPY jvm/ jvm/
# jvm/pom.xml writes the helper jar and its dependencies to /build/.jars, jvm/s3/pom.xml to /build/.jars/s3.
RUN cd jvm && mvn --batch-mode --quiet package dependency:copy-dependencies \
    && if [ "$S3_JARS" = true ]; then cd s3 && mvn --batch-mode --quiet dependency:copy-dependencies; fi

# --- the code location ----------------------------------------------------------------------------------
# bookworm: Debian 12 packages OpenJDK 17 (its successor ships 21 only); Spark 4.1 runs on 17.
FROM python:3.11-slim-bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

ENV VIRTUAL_ENV=/opt/dvmirror/venv \
    PATH=/opt/dvmirror/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DVMIRROR_JARS=/opt/dvmirror/jars
RUN python -m venv "$VIRTUAL_ENV"

# Non-editable, every dependency at the lock's version (the lock constrains; the package's own
# dependencies decide what is installed, so the dev tools in the lock stay out).
COPY pyproject.toml README.md requirements.lock /tmp/dvmirror/
COPY dv_assets/ /tmp/dvmirror/dv_assets/
COPY resources/ /tmp/dvmirror/resources/
COPY build_backend/ /tmp/dvmirror/build_backend/
# The helper jar is package data (the build refuses a wheel without it); the image still loads every jar
# from DVMIRROR_JARS, offline.
COPY --from=jars /build/.jars/dvmirror-jvm.jar /tmp/dvmirror/dv_assets/mirror/jars/
RUN pip install --no-cache-dir -c /tmp/dvmirror/requirements.lock /tmp/dvmirror \
    && rm -rf /tmp/dvmirror

COPY --from=jars /build/.jars/ /opt/dvmirror/jars/

# The working directory holds the defaults: .dvmirror/ (the default catalog and warehouse; mount a volume or
# configure the catalog). The tables are the packaged dv_assets/defs/tables/defs.yaml (the demo's) unless
# DVMIRROR_SOURCES names a file of such documents (or ./sources.yaml exists).
RUN useradd --create-home --uid 1000 dvmirror && mkdir -p /opt/dagster/app && chown dvmirror /opt/dagster/app
WORKDIR /opt/dagster/app
USER dvmirror

# Fails the build if the engine cannot import or Java is missing.
RUN python -c "import dv_assets.mirror, pyspark" && java -version

EXPOSE 4000
CMD ["dagster", "code-server", "start", "-h", "0.0.0.0", "-p", "4000", "-m", "dv_assets.definitions", "--location-name", "dv_mirror"]
