# The local stand-in for opensearchproject/opensearch:2.19.x: OpenSearch's own integ-test-zip and
# mapper-extras jar from Maven Central (the artifacts scripts/opensearch.sh runs) on Debian's
# OpenJDK 17, laid out like the official image (/usr/share/opensearch, user opensearch uid 1000,
# settings from environment variables with dots, curl for health checks). The zip carries no
# security plugin, so the official image's DISABLE_SECURITY_PLUGIN=true is what it does anyway.
ARG BASE_IMAGE=vsparta-local/debian:bookworm
FROM ${BASE_IMAGE}
ARG OS_VERSION=2.19.6
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless unzip >/dev/null \
 && rm -rf /var/lib/apt/lists/*
COPY opensearch.zip mapper-extras.jar /tmp/os/
RUN unzip -q /tmp/os/opensearch.zip -d /usr/share \
 && mv /usr/share/opensearch-${OS_VERSION} /usr/share/opensearch \
 && mkdir -p /usr/share/opensearch/modules/mapper-extras /usr/share/opensearch/data /usr/share/opensearch/logs \
 && cp /tmp/os/mapper-extras.jar /usr/share/opensearch/modules/mapper-extras/mapper-extras-${OS_VERSION}.jar \
 && printf '%s\n' 'description=Adds advanced field mappers (rank_feature, rank_features, ...)' \
      "version=${OS_VERSION}" 'name=mapper-extras' 'classname=org.opensearch.index.mapper.MapperExtrasPlugin' \
      'java.version=11' "opensearch.version=${OS_VERSION}" 'custom.foldername=' 'extended.plugins=' \
      'has.native.controller=false' \
      >/usr/share/opensearch/modules/mapper-extras/plugin-descriptor.properties \
 && printf 'cluster.name: docker-cluster\nnetwork.host: 0.0.0.0\n' >/usr/share/opensearch/config/opensearch.yml \
 && rm -rf /tmp/os \
 && useradd --uid 1000 --gid 0 --home-dir /usr/share/opensearch --no-create-home opensearch \
 && chown -R 1000:0 /usr/share/opensearch
COPY es-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV OPENSEARCH_JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 PATH=/usr/share/opensearch/bin:$PATH \
    VSPARTA_NODE_BIN=/usr/share/opensearch/bin/opensearch
WORKDIR /usr/share/opensearch
USER 1000:0
EXPOSE 9200 9300
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
