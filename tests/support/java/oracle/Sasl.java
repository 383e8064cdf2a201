package oracle;

import static oracle.Clients.bytes;
import static oracle.Clients.map;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * SASL_PLAINTEXT: the right PLAIN password works, a wrong one and a mechanism the listener
 * does not offer (SCRAM-SHA-256) fail; args: user, password.
 */
final class Sasl {
    private Sasl() {}

    private static Map<String, Object> sasl(String mechanism, String user, String password) {
        String module = mechanism.equals("PLAIN")
                ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                : "org.apache.kafka.common.security.scram.ScramLoginModule";
        return Map.of(
                "security.protocol", "SASL_PLAINTEXT",
                "sasl.mechanism", mechanism,
                "sasl.jaas.config",
                module + " required username=\"" + user + "\" password=\"" + password + "\";");
    }

    /** [exception class, message] of a call that fails, or null when it succeeds. */
    private static List<Object> failure(Clients.Call call) {
        try {
            call.call();
            return null;
        } catch (Exception e) {
            Throwable t = Clients.cause(e);
            return Arrays.asList(t.getClass().getSimpleName(), t.getMessage());
        }
    }

    static Map<String, Object> run(String bootstrap, String[] args) throws Exception {
        if (args.length != 2) {
            throw new IllegalArgumentException(
                    "scenario `sasl` takes <user> <password>, got " + Arrays.toString(args));
        }
        String user = args[0];
        String password = args[1];
        Map<String, Object> right = sasl("PLAIN", user, password);
        String topic = Clients.unique("sasl");
        Map<String, Object> seen = map();
        try (Admin admin = Clients.admin(bootstrap, right)) {
            Clients.createTopic(admin, topic, 1, Map.of());
        }
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, right)) {
            ProducerRecord<byte[], byte[]> hello = new ProducerRecord<>(topic, 0, Clients.T0, null, bytes("hello"));
            seen.put("right_password_offset", p.send(hello).get().offset());
        }
        seen.put("right_password_read", Clients.readToEnd(bootstrap, topic, 1, "read_uncommitted", right));
        Map<String, Object> wrong = sasl("PLAIN", user, password + "-wrong");
        try (Admin admin = Clients.admin(bootstrap, wrong)) {
            seen.put("wrong_password_admin", failure(() -> admin.describeCluster().nodes().get()));
        }
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, wrong)) {
            seen.put("wrong_password_producer", failure(() -> p.send(new ProducerRecord<>(topic, bytes("no")))
                    .get()));
        }
        Map<String, Object> unknownUser = sasl("PLAIN", user + "-nobody", password);
        try (Admin admin = Clients.admin(bootstrap, unknownUser)) {
            seen.put("unknown_user_admin", failure(() -> admin.describeCluster().nodes().get()));
        }
        Map<String, Object> scram = sasl("SCRAM-SHA-256", user, password);
        try (Admin admin = Clients.admin(bootstrap, scram)) {
            seen.put("scram_admin", failure(() -> admin.describeCluster().nodes().get()));
        }
        return seen;
    }
}
