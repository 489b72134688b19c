# Apache Kafka in KRaft mode (one process both broker and controller by default), from the same
# Maven Central jars infra/install.sh resolves for `memstream up` (infra/pom.xml). Settings come
# from KAFKA_* variables named as in the apache/kafka image (KAFKA_ADVERTISED_LISTENERS ->
# advertised.listeners), so compose files written for either image run on both.
# Built by infra/images/build.sh, whose staged context holds libs/ (the jars) and the configs.
FROM docker.io/library/debian:bookworm-slim

# openjdk's install scripts register man pages, and fail where slim images have no man folder.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 1000 --home-dir /var/lib/kafka --create-home kafka \
 && mkdir -p /var/lib/kafka/data && chown kafka:kafka /var/lib/kafka/data

COPY libs/ /opt/kafka/libs/
COPY log4j2.yaml kafka-entrypoint.sh /opt/kafka/

USER kafka
VOLUME /var/lib/kafka/data
EXPOSE 9092 9093
ENV KAFKA_HEAP_OPTS="-Xms256m -Xmx512m"
ENTRYPOINT ["/opt/kafka/kafka-entrypoint.sh"]
