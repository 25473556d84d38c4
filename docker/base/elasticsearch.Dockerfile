# The local stand-in for docker.elastic.co/elasticsearch/elasticsearch:7.17.x: Elastic's own
# integ-test-zip and mapper-extras jar from Maven Central (the artifacts scripts/elasticsearch.sh
# runs) on Debian's OpenJDK 17, laid out like the official image (/usr/share/elasticsearch, user
# elasticsearch uid 1000, settings from environment variables with dots, curl for health checks).
ARG BASE_IMAGE=vsparta-local/debian:bookworm
FROM ${BASE_IMAGE}
ARG ES_VERSION=7.17.29
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless unzip >/dev/null \
 && rm -rf /var/lib/apt/lists/*
COPY elasticsearch.zip mapper-extras.jar /tmp/es/
RUN unzip -q /tmp/es/elasticsearch.zip -d /usr/share \
 && mv /usr/share/elasticsearch-${ES_VERSION} /usr/share/elasticsearch \
 && mkdir -p /usr/share/elasticsearch/modules/mapper-extras /usr/share/elasticsearch/data /usr/share/elasticsearch/logs \
 && cp /tmp/es/mapper-extras.jar /usr/share/elasticsearch/modules/mapper-extras/mapper-extras-${ES_VERSION}.jar \
 && printf '%s\n' 'description=Adds advanced field mappers (rank_feature, rank_features, ...)' \
      "version=${ES_VERSION}" 'name=mapper-extras' 'classname=org.elasticsearch.index.mapper.MapperExtrasPlugin' \
      'java.version=1.8' "elasticsearch.version=${ES_VERSION}" 'extended.plugins=' 'has.native.controller=false' \
      >/usr/share/elasticsearch/modules/mapper-extras/plugin-descriptor.properties \
 && printf 'cluster.name: docker-cluster\nnetwork.host: 0.0.0.0\n' >/usr/share/elasticsearch/config/elasticsearch.yml \
 && rm -rf /tmp/es \
 && useradd --uid 1000 --gid 0 --home-dir /usr/share/elasticsearch --no-create-home elasticsearch \
 && chown -R 1000:0 /usr/share/elasticsearch
COPY es-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV ES_JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 PATH=/usr/share/elasticsearch/bin:$PATH
WORKDIR /usr/share/elasticsearch
USER 1000:0
EXPOSE 9200 9300
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
