package oracle;

import static oracle.Clients.bytes;
import static oracle.Clients.map;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * A client configured by a properties file (security.protocol, SASL, TLS), as Kafka's tools
 * take one in --command-config, so no password is on a command line: it creates a topic,
 * produces one record and reads it back. Args: one or more properties files; the result
 * holds, by file name, the offset and what was read, or [exception class, message].
 */
final class Secured {
    private Secured() {}

    static Map<String, Object> run(String bootstrap, String[] args) throws Exception {
        Map<String, Object> seen = map();
        for (String path : args) {
            Properties props = new Properties();
            try (InputStream in = Files.newInputStream(Path.of(path))) {
                props.load(in);
            }
            Map<String, Object> conf = new HashMap<>();
            props.forEach((k, v) -> conf.put((String) k, v));
            seen.put(Path.of(path).getFileName().toString(), roundTrip(bootstrap, conf));
        }
        return seen;
    }

    private static Object roundTrip(String bootstrap, Map<String, Object> conf) {
        try {
            String topic = Clients.unique("secured");
            try (Admin admin = Clients.admin(bootstrap, conf)) {
                Clients.createTopic(admin, topic, 1, Map.of());
            }
            long offset;
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, conf)) {
                offset = p.send(new ProducerRecord<>(topic, 0, Clients.T0, null, bytes("hello"))).get().offset();
            }
            return map("offset", offset,
                    "read", Clients.readToEnd(bootstrap, topic, 1, "read_uncommitted", conf));
        } catch (Exception e) {
            Throwable t = Clients.cause(e);
            return Arrays.asList(t.getClass().getSimpleName(), t.getMessage());
        }
    }
}
