package oracle;

import static oracle.Clients.bytes;
import static oracle.Clients.failure;
import static oracle.Clients.map;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

/** Bad requests: the exception the Java client reports for each, by class name. */
final class Errors {
    private Errors() {}

    static Map<String, Object> run(String bootstrap) throws Exception {
        try (Admin admin = Clients.admin(bootstrap, Map.of())) {
            return map(
                    "unknown_topic", unknownTopic(admin, bootstrap),
                    "invalid_topics", invalidTopics(admin, bootstrap),
                    "record_too_large", recordTooLarge(admin, bootstrap),
                    "out_of_range", outOfRange(admin, bootstrap));
        }
    }

    static Map<String, Object> unknownTopic(Admin admin, String bootstrap) {
        String name = Clients.unique("missing");
        Map<String, Object> seen = map(
                "describe_topics", failure(() -> admin.describeTopics(List.of(name)).allTopicNames().get()),
                "delete_topics", failure(() -> admin.deleteTopics(List.of(name)).all().get()),
                "describe_configs", failure(() -> admin.describeConfigs(
                        List.of(new ConfigResource(ConfigResource.Type.TOPIC, name))).all().get()),
                "create_partitions", failure(() -> admin.createPartitions(
                        Map.of(name, NewPartitions.increaseTo(3))).all().get()));
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, null,
                Map.of("allow.auto.create.topics", false))) {
            seen.put("partitions_for", c.partitionsFor(name).size());
        }
        return seen;
    }

    /** CreateTopics with bad names, counts and configs, one topic per request; a send to a bad name. */
    static Map<String, Object> invalidTopics(Admin admin, String bootstrap) throws Exception {
        String existing = Clients.unique("exists");
        Clients.createTopic(admin, existing, 1, Map.of());
        Map<String, NewTopic> cases = new LinkedHashMap<>();
        cases.put("space", new NewTopic("bad name", 1, (short) 1));
        cases.put("slash", new NewTopic("bad/name", 1, (short) 1));
        cases.put("dot", new NewTopic(".", 1, (short) 1));
        cases.put("dotdot", new NewTopic("..", 1, (short) 1));
        cases.put("too_long", new NewTopic("x".repeat(250), 1, (short) 1));
        cases.put("exists", new NewTopic(existing, 1, (short) 1));
        cases.put("zero_partitions", new NewTopic(Clients.unique("zero"), 0, (short) 1));
        cases.put("replication_too_high", new NewTopic(Clients.unique("rf"), 1, (short) 3));
        cases.put("bad_config_value", new NewTopic(Clients.unique("cfg"), 1, (short) 1)
                .configs(Map.of("cleanup.policy", "bogus")));
        cases.put("unknown_config", new NewTopic(Clients.unique("cfg"), 1, (short) 1)
                .configs(Map.of("no.such.config", "1")));
        Map<String, Object> seen = map();
        for (Map.Entry<String, NewTopic> e : cases.entrySet()) {
            seen.put(e.getKey(), failure(() -> admin.createTopics(List.of(e.getValue())).all().get()));
        }
        String probe = Clients.unique("validate-only");
        seen.put("validate_only", failure(() -> admin.createTopics(List.of(new NewTopic(probe, 2, (short) 1)),
                new CreateTopicsOptions().validateOnly(true)).all().get()));
        seen.put("validate_only_created", admin.listTopics().names().get().contains(probe));
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of("max.block.ms", 5_000))) {
            ProducerRecord<byte[], byte[]> r = new ProducerRecord<>("bad name", bytes("v"));
            seen.put("send_to_bad_name", failure(() -> p.send(r).get()));
        }
        return seen;
    }

    /** max.message.bytes=2048: a larger record is refused, the records around it are written. */
    static List<Object> recordTooLarge(Admin admin, String bootstrap) throws Exception {
        String topic = Clients.unique("too-large");
        Clients.createTopic(admin, topic, 1, Map.of("max.message.bytes", "2048"));
        List<Object> seen = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of())) {
            for (int size : new int[] {100, 5000, 100}) {
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, 0, 1L, null, new byte[size]);
                Object[] offset = {null};
                String error = failure(() -> offset[0] = p.send(r).get().offset());
                seen.add(Arrays.asList(size, error, offset[0]));
            }
        }
        return seen;
    }

    /** A fetch from past the end with auto.offset.reset=none fails; one inside the log reads on. */
    static Map<String, Object> outOfRange(Admin admin, String bootstrap) throws Exception {
        String topic = Clients.unique("range");
        Clients.createTopic(admin, topic, 1, Map.of());
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of())) {
            for (int i = 0; i < 3; i++) {
                p.send(new ProducerRecord<>(topic, 0, null, bytes("r" + i))).get();
            }
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<String, Object> seen = map();
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, null,
                Map.of("auto.offset.reset", "none"))) {
            c.assign(List.of(tp));
            c.seek(tp, 10);
            long deadline = System.currentTimeMillis() + 15_000;
            Object pastEnd = "no error within 15 s";
            while (System.currentTimeMillis() < deadline) {
                try {
                    if (!c.poll(Duration.ofMillis(200)).isEmpty()) {
                        pastEnd = "records";
                        break;
                    }
                } catch (OffsetOutOfRangeException e) {
                    pastEnd = Arrays.asList(e.getClass().getSimpleName(),
                            e.offsetOutOfRangePartitions().get(tp));
                    break;
                }
            }
            seen.put("past_end", pastEnd);
            c.seek(tp, 1);
            List<Object> inside = new ArrayList<>();
            deadline = System.currentTimeMillis() + 15_000;
            while (inside.size() < 2 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    inside.add(r.offset());
                }
            }
            seen.put("inside", inside);
        }
        return seen;
    }
}
