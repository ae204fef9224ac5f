# reasonvqa-pipeline: core image (no torch). Build: docker build -t reasonvqa .
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 \
    PREFECT_SERVER_ANALYTICS_ENABLED=false
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends make \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml setup.py README.md ./
COPY reasonvqa reasonvqa
COPY flows flows
COPY tasks tasks
COPY knowledge knowledge
COPY templates templates
COPY annotation_exports annotation_exports
COPY data data
RUN pip install .
ENTRYPOINT ["reasonvqa"]
CMD ["build", "--sample", "--out", "/out"]
