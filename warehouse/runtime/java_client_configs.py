"""The configuration names Kafka's Java clients know, for MirrorMaker 2's cluster properties.

The project's Kafka settings speak librdkafka (`kafka.client`, `kafka.clusters.<name>.client`).
`warehouse mirror` gives MirrorMaker a project cluster with the Java client settings the
native engine uses (`streams.kafka.java_options`: the login as `sasl.jaas.config`, the CA
as a PEM trust store), and of the rest only what a Java client knows: a librdkafka-only
name (`socket.keepalive.enable`, `queue.buffering.max.ms`) means nothing to MirrorMaker's
producers, consumers and admin clients, which would only log it as unused.
"""

from __future__ import annotations

KAFKA_CLIENTS_VERSION = "4.1.1"
"""The kafka-clients version MirrorMaker runs on (`mirror.CONNECT_VERSION`)."""

JAVA_CLIENT_CONFIGS: frozenset[str] = frozenset(
    """
acks allow.auto.create.topics auto.commit.interval.ms auto.offset.reset batch.size
bootstrap.controllers bootstrap.servers buffer.memory check.crcs client.dns.lookup
client.id client.rack compression.gzip.level compression.lz4.level compression.type
compression.zstd.level connections.max.idle.ms default.api.timeout.ms
delivery.timeout.ms enable.auto.commit enable.idempotence enable.metrics.push
exclude.internal.topics fetch.max.bytes fetch.max.wait.ms fetch.min.bytes group.id
group.instance.id group.protocol group.remote.assignor heartbeat.interval.ms
interceptor.classes internal.leave.group.on.close
internal.throw.on.fetch.stable.offset.unsupported isolation.level key.deserializer
key.serializer linger.ms max.block.ms max.in.flight.requests.per.connection
max.partition.fetch.bytes max.poll.interval.ms max.poll.records max.request.size
metadata.max.age.ms metadata.max.idle.ms metadata.recovery.rebootstrap.trigger.ms
metadata.recovery.strategy metric.reporters metrics.num.samples metrics.recording.level
metrics.sample.window.ms partition.assignment.strategy
partitioner.adaptive.partitioning.enable partitioner.availability.timeout.ms
partitioner.class partitioner.ignore.keys receive.buffer.bytes reconnect.backoff.max.ms
reconnect.backoff.ms request.timeout.ms retries retry.backoff.max.ms retry.backoff.ms
sasl.client.callback.handler.class sasl.jaas.config sasl.kerberos.kinit.cmd
sasl.kerberos.min.time.before.relogin sasl.kerberos.service.name
sasl.kerberos.ticket.renew.jitter sasl.kerberos.ticket.renew.window.factor
sasl.login.callback.handler.class sasl.login.class sasl.login.connect.timeout.ms
sasl.login.read.timeout.ms sasl.login.refresh.buffer.seconds
sasl.login.refresh.min.period.seconds sasl.login.refresh.window.factor
sasl.login.refresh.window.jitter sasl.login.retry.backoff.max.ms
sasl.login.retry.backoff.ms sasl.mechanism sasl.oauthbearer.assertion.algorithm
sasl.oauthbearer.assertion.claim.aud sasl.oauthbearer.assertion.claim.exp.seconds
sasl.oauthbearer.assertion.claim.iss sasl.oauthbearer.assertion.claim.jti.include
sasl.oauthbearer.assertion.claim.nbf.seconds sasl.oauthbearer.assertion.claim.sub
sasl.oauthbearer.assertion.file sasl.oauthbearer.assertion.private.key.file
sasl.oauthbearer.assertion.private.key.passphrase
sasl.oauthbearer.assertion.template.file sasl.oauthbearer.client.credentials.client.id
sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.clock.skew.seconds
sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
sasl.oauthbearer.header.urlencode sasl.oauthbearer.jwks.endpoint.refresh.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.url
sasl.oauthbearer.jwt.retriever.class sasl.oauthbearer.jwt.validator.class
sasl.oauthbearer.scope sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
sasl.oauthbearer.token.endpoint.url security.protocol security.providers
send.buffer.bytes session.timeout.ms share.acknowledgement.mode
socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms
ssl.cipher.suites ssl.enabled.protocols ssl.endpoint.identification.algorithm
ssl.engine.factory.class ssl.key.password ssl.keymanager.algorithm
ssl.keystore.certificate.chain ssl.keystore.key ssl.keystore.location
ssl.keystore.password ssl.keystore.type ssl.protocol ssl.provider
ssl.secure.random.implementation ssl.trustmanager.algorithm ssl.truststore.certificates
ssl.truststore.location ssl.truststore.password ssl.truststore.type
transaction.timeout.ms transaction.two.phase.commit.enable transactional.id
value.deserializer value.serializer
""".split()
)
"""`ProducerConfig.configNames()`, `ConsumerConfig.configNames()` and
`AdminClientConfig.configNames()` of kafka-clients `KAFKA_CLIENTS_VERSION`, the clients
MirrorMaker opens on each cluster (tests/integration/connect/test_java_client_configs.py
reads them from the cached jar)."""
