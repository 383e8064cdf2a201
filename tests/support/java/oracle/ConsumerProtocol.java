package oracle;

import static oracle.Clients.bytes;
import static oracle.Clients.map;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * A consumer asking for the KIP-848 group protocol (`group.protocol=consumer`) of a broker
 * that does not offer it: what its poll reports; the same consumer with the classic
 * protocol reads the topic.
 */
final class ConsumerProtocol {
    private ConsumerProtocol() {}

    private static Object poll(String bootstrap, String topic, String protocol) {
        Map<String, Object> conf = protocol.equals("consumer")
                ? Map.of("group.protocol", "consumer")
                : Map.of("group.protocol", "classic");
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, Clients.unique("group"), conf)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 15_000;
            while (System.currentTimeMillis() < deadline) {
                if (!c.poll(Duration.ofMillis(200)).isEmpty()) {
                    return "records";
                }
            }
            return "nothing within 15 s";
        } catch (Exception e) {
            Throwable t = Clients.cause(e);
            return Arrays.asList(t.getClass().getSimpleName(), t.getMessage());
        }
    }

    static Map<String, Object> run(String bootstrap) throws Exception {
        String topic = Clients.unique("protocol");
        try (Admin admin = Clients.admin(bootstrap, Map.of())) {
            Clients.createTopic(admin, topic, 1, Map.of());
        }
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of())) {
            p.send(new ProducerRecord<>(topic, 0, Clients.T0, null, bytes("v"))).get();
        }
        return map("consumer", poll(bootstrap, topic, "consumer"), "classic", poll(bootstrap, topic, "classic"));
    }
}
