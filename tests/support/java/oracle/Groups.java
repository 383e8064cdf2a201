package oracle;

import static oracle.Clients.bytes;
import static oracle.Clients.map;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/** Consumer groups: committed offsets with metadata, assignments covering every partition once. */
final class Groups {
    private Groups() {}

    static Map<String, Object> run(String bootstrap) throws Exception {
        try (Admin admin = Clients.admin(bootstrap, Map.of())) {
            return map(
                    "committed", committed(admin, bootstrap),
                    "assignment", assignment(admin, bootstrap));
        }
    }

    private static List<Object> offset(int partition, OffsetAndMetadata om) {
        return om == null
                ? Arrays.asList(partition, null)
                : Arrays.asList(partition, om.offset(), om.metadata(), om.leaderEpoch().orElse(null));
    }

    /**
     * Commit offsets with metadata for two of three partitions, read them back through the
     * consumer and the admin API; where a new member of the group starts.
     */
    static Map<String, Object> committed(Admin admin, String bootstrap) throws Exception {
        String topic = Clients.unique("commits");
        String group = Clients.unique("group");
        Clients.createTopic(admin, topic, 3, Map.of());
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of())) {
            for (int part = 0; part < 3; part++) {
                for (int i = 0; i < 4; i++) {
                    p.send(new ProducerRecord<>(topic, part, null, bytes(part + "-" + i))).get();
                }
            }
        }
        List<TopicPartition> tps = Clients.partitions(topic, 3);
        List<Object> readBack = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, group, Map.of())) {
            c.commitSync(Map.of(tps.get(0), new OffsetAndMetadata(2, "first"),
                    tps.get(1), new OffsetAndMetadata(4, "")));
            c.commitSync(Map.of(tps.get(0), new OffsetAndMetadata(3, "second")));
            Map<TopicPartition, OffsetAndMetadata> got = c.committed(new HashSet<>(tps));
            for (TopicPartition tp : tps) {
                readBack.add(offset(tp.partition(), got.get(tp)));
            }
        }
        Map<TopicPartition, OffsetAndMetadata> listed = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get();
        List<Object> viaAdmin = new ArrayList<>();
        for (TopicPartition tp : tps) {
            if (listed.containsKey(tp)) {
                viaAdmin.add(offset(tp.partition(), listed.get(tp)));
            }
        }
        List<Object> positions = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, group, Map.of())) {
            c.assign(tps);
            for (TopicPartition tp : tps) {
                positions.add(c.position(tp));
            }
        }
        return map("read_back", readBack, "via_admin", viaAdmin, "resumed_at", positions);
    }

    /** A group member polling on its own thread, publishing its assignment after each poll. */
    private static final class Member {
        private volatile Set<Integer> assigned = Set.of();
        private volatile boolean stop;
        private volatile Exception failed;
        private final Thread thread;

        Member(String bootstrap, String group, String topic) {
            thread = new Thread(() -> {
                try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, group, Map.of())) {
                    c.subscribe(List.of(topic));
                    while (!stop) {
                        c.poll(Duration.ofMillis(100));
                        Set<Integer> now = new TreeSet<>();
                        c.assignment().forEach(tp -> now.add(tp.partition()));
                        assigned = now;
                    }
                } catch (Exception e) {
                    failed = e;
                }
            });
            thread.start();
        }

        Set<Integer> assigned() {
            if (failed != null) {
                throw new IllegalStateException("group member failed", failed);
            }
            return assigned;
        }

        void close() throws InterruptedException {
            stop = true;
            thread.join(30_000);
        }
    }

    private static void await(String what, BooleanSupplier done) throws InterruptedException {
        long deadline = System.currentTimeMillis() + Clients.WAIT_MS;
        while (!done.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("not within 30 s: " + what);
            }
            Thread.sleep(50);
        }
    }

    private static List<Object> describe(Admin admin, String group) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                .get();
        List<Integer> sizes = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            sizes.add(m.assignment().topicPartitions().size());
        }
        sizes.sort(null);
        return Arrays.asList(d.groupState().toString(), d.type().toString(), d.partitionAssignor(), sizes);
    }

    /** Two members share five partitions, then one leaves and the other takes all five. */
    static Map<String, Object> assignment(Admin admin, String bootstrap) throws Exception {
        String topic = Clients.unique("assign");
        String group = Clients.unique("group");
        Clients.createTopic(admin, topic, 5, Map.of());
        Set<Integer> all = Set.of(0, 1, 2, 3, 4);
        Member first = new Member(bootstrap, group, topic);
        Member second = new Member(bootstrap, group, topic);
        Map<String, Object> out;
        try {
            await("two members cover five partitions", () -> {
                Set<Integer> a = first.assigned();
                Set<Integer> b = second.assigned();
                Set<Integer> union = new HashSet<>(a);
                union.addAll(b);
                return !a.isEmpty() && !b.isEmpty() && a.size() + b.size() == 5 && union.equals(all);
            });
            List<Integer> sizes = new ArrayList<>(List.of(first.assigned().size(), second.assigned().size()));
            sizes.sort(null);
            out = map("two_members", sizes, "two_members_group", describe(admin, group));
            second.close();
            await("the remaining member takes all five", () -> first.assigned().equals(all));
            out.put("one_member", new ArrayList<>(first.assigned()));
        } finally {
            first.close();
            second.close();
        }
        out.put("after_close", describe(admin, group));
        return out;
    }
}
