package oracle;

import static oracle.Clients.T0;
import static oracle.Clients.bytes;
import static oracle.Clients.map;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/** Records: keys, values, headers, timestamps (CreateTime, LogAppendTime), codecs, offsets. */
final class Records {
    private Records() {}

    static Map<String, Object> run(String bootstrap) throws Exception {
        try (Admin admin = Clients.admin(bootstrap, Map.of())) {
            return map(
                    "round_trip", roundTrip(admin, bootstrap),
                    "codecs", codecs(admin, bootstrap),
                    "log_append_time", logAppendTime(admin, bootstrap),
                    "offsets", offsets(admin, bootstrap));
        }
    }

    private static List<Header> headers(String... kv) {
        List<Header> out = new ArrayList<>();
        for (int i = 0; i < kv.length; i += 2) {
            out.add(new RecordHeader(kv[i], bytes(kv[i + 1])));
        }
        return out;
    }

    private static List<Object> delivered(RecordMetadata md) {
        return Arrays.asList(md.partition(), md.offset(), md.timestamp());
    }

    static Map<String, Object> roundTrip(Admin admin, String bootstrap) throws Exception {
        String topic = Clients.unique("records");
        Clients.createTopic(admin, topic, 3, Map.of());
        byte[] big = new byte[256 * 400];
        for (int i = 0; i < big.length; i++) {
            big[i] = (byte) i;
        }
        List<ProducerRecord<byte[], byte[]>> records = List.of(
                new ProducerRecord<>(topic, 0, T0, bytes("k1"), bytes("v1"),
                        headers("h", "1", "h", "2", "empty", "")),
                new ProducerRecord<>(topic, 0, T0 + 1, null, bytes("no key")),
                new ProducerRecord<>(topic, 1, T0 + 2, bytes("tomb"), null, headers("null-value", null)),
                // an older timestamp after a newer one: CreateTime keeps what the producer set
                new ProducerRecord<>(topic, 1, T0 - 60_000, bytes(""), bytes("")),
                new ProducerRecord<>(topic, 2, T0 + 3, bytes("big"), big),
                new ProducerRecord<>(topic, 2, T0 + 4, bytes("ünïcode"), bytes("xxxxxxxxxx"),
                        headers("ключ", "значение")));
        List<Object> deliveries = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of())) {
            for (ProducerRecord<byte[], byte[]> r : records) {
                deliveries.add(delivered(p.send(r).get()));
            }
        }
        Map<String, Object> out = map("deliveries", deliveries);
        out.putAll(Clients.readToEnd(bootstrap, topic, 3, "read_uncommitted"));
        return out;
    }

    /** One producer per codec, each writing one batch of 50 records. */
    static Map<String, Object> codecs(Admin admin, String bootstrap) throws Exception {
        String topic = Clients.unique("codecs");
        Clients.createTopic(admin, topic, 1, Map.of());
        Map<String, Object> deliveries = new LinkedHashMap<>();
        for (String codec : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap,
                    Map.of("compression.type", codec, "linger.ms", 50))) {
                for (int i = 0; i < 50; i++) {
                    sent.add(p.send(new ProducerRecord<>(topic, 0, T0 + i, bytes(codec + "-" + i),
                            bytes(("value " + i + " ").repeat(20)))));
                }
                p.flush();
            }
            List<Object> offsets = new ArrayList<>();
            for (Future<RecordMetadata> f : sent) {
                offsets.add(f.get().offset());
            }
            deliveries.put(codec, offsets);
        }
        Map<String, Object> out = map("deliveries", deliveries);
        out.putAll(Clients.readToEnd(bootstrap, topic, 1, "read_uncommitted"));
        return out;
    }

    /** A LogAppendTime topic: the broker's clock replaces the producer's timestamp. */
    static List<Object> logAppendTime(Admin admin, String bootstrap) throws Exception {
        String topic = Clients.unique("append-time");
        Clients.createTopic(admin, topic, 1, Map.of("message.timestamp.type", "LogAppendTime"));
        long before = System.currentTimeMillis();
        List<RecordMetadata> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of())) {
            sent.add(p.send(new ProducerRecord<>(topic, 0, T0, null, bytes("a"))).get());
            sent.add(p.send(new ProducerRecord<>(topic, 0, null, null, bytes("b"))).get());
        }
        long after = System.currentTimeMillis();
        List<Object> seen = new ArrayList<>();
        for (RecordMetadata md : sent) {
            seen.add(Arrays.asList("delivered", md.offset(), before <= md.timestamp() && md.timestamp() <= after));
        }
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> read = (List<Map<String, Object>>) Clients
                .readToEnd(bootstrap, topic, 1, "read_uncommitted").get("records");
        for (Map<String, Object> r : read) {
            long ts = (Long) r.get("timestamp");
            seen.add(Arrays.asList("read", r.get("offset"), r.get("timestamp_type"), before <= ts && ts <= after));
        }
        return seen;
    }

    /** Offsets by timestamp (consumer and admin), earliest/latest/max-timestamp, DeleteRecords. */
    static Map<String, Object> offsets(Admin admin, String bootstrap) throws Exception {
        String topic = Clients.unique("offsets");
        Clients.createTopic(admin, topic, 1, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        long[] stamps = {T0 + 1000, T0 + 3000, T0 + 2000, T0 + 4000, T0 + 5000};
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of())) {
            for (int i = 0; i < stamps.length; i++) {
                p.send(new ProducerRecord<>(topic, 0, stamps[i], null, bytes("r" + i))).get();
            }
        }
        List<Object> byTime = new ArrayList<>();
        List<Object> bounds;
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, null, Map.of())) {
            for (long t : new long[] {0, T0 + 1000, T0 + 1500, T0 + 2500, T0 + 9000}) {
                OffsetAndTimestamp found = c.offsetsForTimes(Map.of(tp, t)).get(tp);
                byTime.add(found == null ? null : List.of(found.offset(), found.timestamp()));
            }
            bounds = List.of(c.beginningOffsets(List.of(tp)).get(tp), c.endOffsets(List.of(tp)).get(tp));
        }
        Map<String, OffsetSpec> specs = new LinkedHashMap<>();
        specs.put("earliest", OffsetSpec.earliest());
        specs.put("latest", OffsetSpec.latest());
        specs.put("max_timestamp", OffsetSpec.maxTimestamp());
        specs.put("at_2500", OffsetSpec.forTimestamp(T0 + 2500));
        specs.put("at_9000", OffsetSpec.forTimestamp(T0 + 9000));
        Map<String, Object> listed = new LinkedHashMap<>();
        for (Map.Entry<String, OffsetSpec> e : specs.entrySet()) {
            ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, e.getValue())).partitionResult(tp)
                    .get();
            listed.put(e.getKey(), List.of(info.offset(), info.timestamp()));
        }
        long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(2))).lowWatermarks().get(tp)
                .get().lowWatermark();
        return map(
                "by_time", byTime,
                "bounds", bounds,
                "listed", listed,
                "deleted_to", low,
                "after_delete", Clients.readToEnd(bootstrap, topic, 1, "read_uncommitted"));
    }
}
