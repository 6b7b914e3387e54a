# One image for every service of docker-compose.yml: API, agent, compile and GPU workers.
# The CUDA devel base brings nvcc (compile workers) and the driver API headers pycuda builds
# against (GPU workers); the API and the agent simply never use them.
FROM nvidia/cuda:12.8.1-devel-ubuntu24.04

RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev build-essential \
 && rm -rf /var/lib/apt/lists/*

ENV VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 \
    TUNEFORGE_HOME=/var/lib/tuneforge
RUN python3 -m venv /opt/venv && pip install --no-cache-dir --upgrade pip

WORKDIR /app
COPY pyproject.toml ./
COPY core core
COPY kernels kernels
COPY worker worker
COPY agent agent
COPY api api
COPY cli cli
COPY migrations migrations
# editable: the migrations directory is found next to the code (core/db.py); EXTRAS= (empty)
# builds an image without pycuda, for a replay stack
ARG EXTRAS=gpu
RUN pip install --no-cache-dir -e ".${EXTRAS:+[$EXTRAS]}"

RUN useradd --create-home --uid 10001 tuneforge \
 && mkdir -p /var/lib/tuneforge && chown tuneforge /var/lib/tuneforge
USER tuneforge
EXPOSE 8000
CMD ["tuneforge", "serve", "--host", "0.0.0.0", "--port", "8000"]
