# reasonvqa-pipeline: the core build (no torch). Build: docker build -t reasonvqa .
# Run: docker run --rm -v "$PWD/out:/home/reasonvqa/out" reasonvqa   (builds the bundled sample into ./out)
# Dependencies are pinned by docker/constraints.txt (tested versions); hadolint lints this file in `make test`.
FROM python:3.11.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PREFECT_SERVER_ANALYTICS_ENABLED=false

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin reasonvqa

WORKDIR /opt/reasonvqa
COPY docker/constraints.txt ./docker/constraints.txt
COPY pyproject.toml setup.py README.md prefect.yaml ./
COPY reasonvqa reasonvqa
COPY flows flows
COPY tasks tasks
COPY knowledge knowledge
COPY templates templates
COPY annotation_exports annotation_exports
COPY data data
RUN pip install --no-cache-dir --constraint docker/constraints.txt .

USER 10001
WORKDIR /home/reasonvqa
ENTRYPOINT ["reasonvqa"]
CMD ["build", "--sample", "--out", "out"]
