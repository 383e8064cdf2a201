package oracle;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Clients and the normalized views of what they observe, shared by the scenarios. */
final class Clients {
    static final long T0 = 1_700_000_000_000L;
    static final long WAIT_MS = 30_000;

    private Clients() {}

    interface Call {
        Object call() throws Exception;
    }

    static String unique(String prefix) {
        return "oracle-java-" + prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static byte[] bytes(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    /** An insertion-ordered map of key, value pairs; values may be null (unlike Map.of). */
    static Map<String, Object> map(Object... kv) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            out.put((String) kv[i], kv[i + 1]);
        }
        return out;
    }

    static Properties props(String bootstrap, Map<String, Object> extra) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.putAll(extra);
        return p;
    }

    static Admin admin(String bootstrap, Map<String, Object> extra) {
        Map<String, Object> conf = new HashMap<>(
                Map.of("request.timeout.ms", 10_000, "default.api.timeout.ms", 30_000));
        conf.putAll(extra);
        return Admin.create(props(bootstrap, conf));
    }

    static void createTopic(Admin admin, String topic, int partitions, Map<String, String> configs)
            throws Exception {
        // T0 is in 2023, older than the default 7-day retention: keep everything, or a
        // broker's retention check could delete the segment mid-scenario.
        Map<String, String> all = new HashMap<>(Map.of("retention.ms", "-1"));
        all.putAll(configs);
        NewTopic t = new NewTopic(topic, partitions, (short) 1).configs(all);
        admin.createTopics(List.of(t)).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, Map<String, Object> extra) {
        Map<String, Object> conf = new HashMap<>(Map.of("linger.ms", 5, "max.block.ms", 20_000));
        conf.putAll(extra);
        return new KafkaProducer<>(props(bootstrap, conf), new ByteArraySerializer(), new ByteArraySerializer());
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String group, Map<String, Object> extra) {
        Map<String, Object> conf = new HashMap<>(Map.of(
                "enable.auto.commit", false,
                "auto.offset.reset", "earliest",
                "fetch.max.wait.ms", 50,
                "session.timeout.ms", 6000,
                "heartbeat.interval.ms", 300,
                "default.api.timeout.ms", 30_000));
        if (group != null) {
            conf.put("group.id", group);
        }
        conf.putAll(extra);
        if ("consumer".equals(conf.get("group.protocol"))) {
            // the KIP-848 protocol takes the session and heartbeat from the broker
            conf.remove("session.timeout.ms");
            conf.remove("heartbeat.interval.ms");
        }
        return new KafkaConsumer<>(
                props(bootstrap, conf), new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    /** The exception a call ends with, unwrapped from the future's ExecutionException. */
    static Throwable cause(Throwable t) {
        while ((t instanceof ExecutionException || t.getClass() == KafkaException.class)
                && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    /** null when `call` succeeds, else the simple class name of the exception it ends with. */
    static String failure(Call call) {
        try {
            call.call();
            return null;
        } catch (Exception e) {
            return cause(e).getClass().getSimpleName();
        }
    }

    static List<Object> headers(Iterable<Header> headers) {
        List<Object> out = new ArrayList<>();
        for (Header h : headers) {
            out.add(java.util.Arrays.asList(h.key(), h.value()));
        }
        return out;
    }

    static Map<String, Object> record(ConsumerRecord<byte[], byte[]> r) {
        return map(
                "partition", r.partition(),
                "offset", r.offset(),
                "key", r.key(),
                "value", r.value(),
                "timestamp_type", r.timestampType().toString(),
                "timestamp", r.timestamp(),
                "headers", headers(r.headers()));
    }

    static List<TopicPartition> partitions(String topic, int count) {
        List<TopicPartition> out = new ArrayList<>();
        for (int p = 0; p < count; p++) {
            out.add(new TopicPartition(topic, p));
        }
        return out;
    }

    /**
     * Every record of `topic` from its start up to the end the isolation level sees (the
     * high watermark, or the last stable offset under read_committed):
     * {"ends": {partition: [low, end]}, "records": [record, ...]}.
     */
    static Map<String, Object> readToEnd(String bootstrap, String topic, int count, String isolation,
            Map<String, Object> extra) {
        Map<String, Object> conf = new HashMap<>(extra);
        conf.put("isolation.level", isolation);
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, null, conf)) {
            List<TopicPartition> tps = partitions(topic, count);
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> low = c.beginningOffsets(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            List<Map<String, Object>> out = new ArrayList<>();
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("`" + topic + "`: not at the end " + end + " after 30 s");
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    out.add(record(r));
                }
            }
            out.sort(Comparator.comparing((Map<String, Object> r) -> (Integer) r.get("partition"))
                    .thenComparing(r -> (Long) r.get("offset")));
            Map<String, Object> ends = new LinkedHashMap<>();
            for (TopicPartition tp : tps) {
                ends.put(String.valueOf(tp.partition()), List.of(low.get(tp), end.get(tp)));
            }
            return map("ends", ends, "records", out);
        }
    }

    static Map<String, Object> readToEnd(String bootstrap, String topic, int count, String isolation) {
        return readToEnd(bootstrap, topic, count, isolation, Map.of());
    }
}
