// The Java transactional producer over a secured listener: three records "<txnid>-<i>"
// to partition 0 of <topic> in one transaction, committed.
// Run as a single-source program: java -cp 'kafka-clients jars/*' SecTxn.java
//   <bootstrap> <topic> <transactional id> [client property key=value ...]
// Prints COMMITTED; on failure prints FAILED: and the exception (and its causes) and
// exits 1 (tests/security/test_txn_acls.py).

import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class SecTxn {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        for (int i = 3; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            p.put(kv[0], kv[1]);
        }
        String topic = args[1];
        String txnId = args[2];
        p.put("transactional.id", txnId);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("max.block.ms", "15000");
        p.put("delivery.timeout.ms", "15000");
        p.put("request.timeout.ms", "10000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k", txnId + "-" + i)).get();
            }
            producer.commitTransaction();
            System.out.println("COMMITTED");
            System.exit(0);
        } catch (Exception e) {
            System.err.println("FAILED: " + e);
            Throwable cause = e.getCause();
            while (cause != null) {
                System.err.println("caused by: " + cause);
                cause = cause.getCause();
            }
            System.exit(1);
        }
    }
}
