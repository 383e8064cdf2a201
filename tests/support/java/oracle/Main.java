package oracle;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.util.Arrays;

/**
 * The Java client's oracle scenarios: {@code java oracle.Main <scenario> <bootstrap> [args]}
 * runs one scenario group against one broker and prints what the client observed as one
 * JSON object on stdout (byte arrays as base64, exceptions as their class names). The
 * Python side (tests/support/java_client.py) runs it on both brokers and compares.
 */
public final class Main {
    private Main() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: oracle.Main <scenario> <bootstrap> [args...]");
            System.exit(2);
        }
        String bootstrap = args[1];
        String[] rest = Arrays.copyOfRange(args, 2, args.length);
        Object result;
        switch (args[0]) {
            case "records" -> result = Records.run(bootstrap);
            case "groups" -> result = Groups.run(bootstrap);
            case "transactions" -> result = Transactions.run(bootstrap);
            case "errors" -> result = Errors.run(bootstrap);
            case "sasl" -> result = Sasl.run(bootstrap, rest);
            case "consumer_protocol" -> result = ConsumerProtocol.run(bootstrap);
            case "secured" -> result = Secured.run(bootstrap, rest);
            default -> {
                System.err.println("scenario `" + args[0] + "` is not known; expected one of "
                        + "records, groups, transactions, errors, sasl, consumer_protocol, secured");
                System.exit(2);
                return;
            }
        }
        ObjectMapper json = new ObjectMapper().enable(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS);
        System.out.println(json.writeValueAsString(result));
        System.out.flush();
        // client threads (e.g. a fenced producer's sender) must not keep the JVM alive
        System.exit(0);
    }
}
