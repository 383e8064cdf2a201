package oracle;

import static oracle.Clients.bytes;
import static oracle.Clients.map;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;

/**
 * Transactions: what read_committed and read_uncommitted readers get (and where the last
 * stable offset is under an open transaction), offsets sent in a transaction, fencing.
 */
final class Transactions {
    private Transactions() {}

    static Map<String, Object> run(String bootstrap) throws Exception {
        try (Admin admin = Clients.admin(bootstrap, Map.of())) {
            return map(
                    "isolation", isolation(admin, bootstrap),
                    "offsets", offsetsInTransactions(admin, bootstrap),
                    "fenced", fenced(admin, bootstrap),
                    "left_open", leftOpen(admin, bootstrap));
        }
    }

    private static KafkaProducer<byte[], byte[]> producer(String bootstrap, String txnId) {
        KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of("transactional.id", txnId));
        p.initTransactions();
        return p;
    }

    /**
     * Wait until partition 0 has no transaction open: its last stable offset equals its high
     * watermark. A broker answers EndTxn once the outcome is decided and writes the markers
     * after that (Kafka asynchronously), so a reader started right away may stop short.
     */
    private static void settled(String bootstrap, String topic) throws InterruptedException {
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> committed = Clients.consumer(bootstrap, null,
                        Map.of("isolation.level", "read_committed"));
                KafkaConsumer<byte[], byte[]> uncommitted = Clients.consumer(bootstrap, null, Map.of())) {
            long deadline = System.currentTimeMillis() + Clients.WAIT_MS;
            while (true) {
                long stable = committed.endOffsets(List.of(tp)).get(tp);
                long high = uncommitted.endOffsets(List.of(tp)).get(tp);
                if (stable == high) {
                    return;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException(topic + ": stable offset " + stable + " < " + high);
                }
                Thread.sleep(50);
            }
        }
    }

    /** One transaction of `values` into partition 0: committed, aborted or (null) left open. */
    private static void transaction(KafkaProducer<byte[], byte[]> p, String bootstrap, String topic,
            List<String> values, Boolean commit) throws Exception {
        p.beginTransaction();
        for (String v : values) {
            p.send(new ProducerRecord<>(topic, 0, null, bytes(v)));
        }
        p.flush();
        if (commit == null) {
            return;
        }
        if (commit) {
            p.commitTransaction();
        } else {
            p.abortTransaction();
        }
        settled(bootstrap, topic);
    }

    /** {"ends": ..., "records": [[offset, value], ...]} as `isolation` reads the topic. */
    @SuppressWarnings("unchecked")
    private static Map<String, Object> values(String bootstrap, String topic, String isolation) {
        Map<String, Object> read = Clients.readToEnd(bootstrap, topic, 1, isolation);
        List<Object> records = new ArrayList<>();
        for (Map<String, Object> r : (List<Map<String, Object>>) read.get("records")) {
            records.add(Arrays.asList(r.get("offset"), r.get("value")));
        }
        return map("ends", read.get("ends"), "records", records);
    }

    static Map<String, Object> isolation(Admin admin, String bootstrap) throws Exception {
        String topic = Clients.unique("txn");
        Clients.createTopic(admin, topic, 1, Map.of());
        Map<String, Object> seen = map();
        try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, Clients.unique("txn-id"))) {
            transaction(p, bootstrap, topic, List.of("a", "b"), true);
            transaction(p, bootstrap, topic, List.of("c"), false);
            transaction(p, bootstrap, topic, List.of("d"), true);
            transaction(p, bootstrap, topic, List.of("e", "f"), null);
            for (String isolation : List.of("read_committed", "read_uncommitted")) {
                seen.put("open/" + isolation, values(bootstrap, topic, isolation));
            }
            p.commitTransaction();
            settled(bootstrap, topic);
        }
        for (String isolation : List.of("read_committed", "read_uncommitted")) {
            seen.put("closed/" + isolation, values(bootstrap, topic, isolation));
        }
        return seen;
    }

    /** sendOffsetsToTransaction: the group's offset appears only when the transaction commits. */
    static List<Object> offsetsInTransactions(Admin admin, String bootstrap) throws Exception {
        String topic = Clients.unique("txn-offsets");
        String group = Clients.unique("group");
        Clients.createTopic(admin, topic, 1, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        List<Object> seen = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, group,
                        Map.of("isolation.level", "read_committed"));
                KafkaProducer<byte[], byte[]> p = producer(bootstrap, Clients.unique("txn-id"))) {
            c.assign(List.of(tp));
            for (long offset : new long[] {5, 7}) {
                boolean commit = offset == 7;
                p.beginTransaction();
                p.send(new ProducerRecord<>(topic, 0, null, bytes("v" + offset)));
                p.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(offset, "in-txn")),
                        c.groupMetadata());
                if (commit) {
                    p.commitTransaction();
                } else {
                    p.abortTransaction();
                }
                OffsetAndMetadata om = c.committed(java.util.Set.of(tp)).get(tp);
                seen.add(om == null
                        ? Arrays.asList(commit, null)
                        : Arrays.asList(commit, om.offset(), om.metadata()));
            }
        }
        return seen;
    }

    /**
     * A second producer with the same transactional.id fences the first, whose open
     * transaction is aborted; the first's commit fails.
     */
    static Map<String, Object> fenced(Admin admin, String bootstrap) throws Exception {
        String topic = Clients.unique("fenced");
        String txnId = Clients.unique("txn-id");
        Clients.createTopic(admin, topic, 1, Map.of());
        KafkaProducer<byte[], byte[]> first = producer(bootstrap, txnId);
        String firstCommit;
        try {
            transaction(first, bootstrap, topic, List.of("from first"), null);
            try (KafkaProducer<byte[], byte[]> second = producer(bootstrap, txnId)) {
                firstCommit = Clients.failure(() -> {
                    first.commitTransaction();
                    return null;
                });
                transaction(second, bootstrap, topic, List.of("from second"), true);
            }
        } finally {
            first.close(Duration.ofSeconds(5));
        }
        return map(
                "first_commit", firstCommit,
                "read_committed", values(bootstrap, topic, "read_committed"),
                "read_uncommitted", values(bootstrap, topic, "read_uncommitted"));
    }

    /**
     * A transaction its producer left open, as a process killed mid-transaction leaves it,
     * read as Kafka Connect reads its offsets, config and status topics (KafkaBasedLog with
     * exactly-once source support): the end offset the admin client lists by default
     * (read_uncommitted), a read_committed consumer reading from the start until its
     * position reaches it. The reader stops at the last stable offset, short of that end,
     * until the transaction ends; Admin.fenceProducers (InitProducerId with a 1 ms timeout,
     * what a Connect leader does to a task's transactional id) ends it at once, aborted, and
     * the reader then reaches the end.
     */
    static Map<String, Object> leftOpen(Admin admin, String bootstrap) throws Exception {
        String topic = Clients.unique("left-open");
        String txnId = Clients.unique("txn-id");
        Clients.createTopic(admin, topic, 1, Map.of());
        KafkaProducer<byte[], byte[]> killed = producer(bootstrap, txnId);
        Map<String, Object> seen = map();
        try {
            transaction(killed, bootstrap, topic, List.of("committed"), true);
            transaction(killed, bootstrap, topic, List.of("left open"), null);
            seen.put("open", logRead(admin, bootstrap, topic));
            admin.fenceProducers(List.of(txnId)).all().get();
            settled(bootstrap, topic);
            seen.put("fenced", logRead(admin, bootstrap, topic));
        } finally {
            killed.close(Duration.ZERO);
        }
        return seen;
    }

    /**
     * Partition 0 of `topic` as Connect's KafkaBasedLog reads it: the end offsets the admin
     * lists under each isolation level, then a read_committed consumer polls from the start
     * until its position reaches the read_uncommitted end, or five polls after it reached the
     * read_committed one: where its position stopped and the values it got.
     */
    private static Map<String, Object> logRead(Admin admin, String bootstrap, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        long end = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get().offset();
        long stable = admin.listOffsets(Map.of(tp, OffsetSpec.latest()),
                new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(tp).get().offset();
        List<Object> values = new ArrayList<>();
        long position;
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, null,
                Map.of("isolation.level", "read_committed"))) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + Clients.WAIT_MS;
            int pollsAtStable = 0;
            while (c.position(tp) < end && pollsAtStable < 5) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException(topic + ": position " + c.position(tp)
                            + " short of the stable offset " + stable + " after 30 s");
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    values.add(Arrays.asList(r.offset(), new String(r.value(), StandardCharsets.UTF_8)));
                }
                if (c.position(tp) >= stable) {
                    pollsAtStable++;
                }
            }
            position = c.position(tp);
        }
        return map("listed_end", end, "listed_stable", stable, "position", position, "values", values);
    }
}
