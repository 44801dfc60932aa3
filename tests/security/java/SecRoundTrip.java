// The Java client over a secured listener: produce five records, read them back.
// Run as a single-source program: java -cp 'kafka-clients jars/*' SecRoundTrip.java
//   <bootstrap> <topic> [client property key=value ...]
// Prints the values read, one per line; exit status 1 (and the error) on failure.

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class SecRoundTrip {
    public static void main(String[] args) {
        Properties common = new Properties();
        common.put("bootstrap.servers", args[0]);
        for (int i = 2; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            common.put(kv[0], kv[1]);
        }
        String topic = args[1];
        try {
            Properties p = new Properties();
            p.putAll(common);
            p.put("key.serializer", StringSerializer.class.getName());
            p.put("value.serializer", StringSerializer.class.getName());
            p.put("max.block.ms", "15000");
            p.put("delivery.timeout.ms", "15000");
            p.put("request.timeout.ms", "10000");
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                for (int i = 0; i < 5; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, "k", "v" + i)).get();
                }
            }
            Properties c = new Properties();
            c.putAll(common);
            c.put("key.deserializer", StringDeserializer.class.getName());
            c.put("value.deserializer", StringDeserializer.class.getName());
            c.put("enable.auto.commit", "false");
            c.put("default.api.timeout.ms", "15000");
            List<String> got = new ArrayList<>();
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
                TopicPartition tp = new TopicPartition(topic, 0);
                consumer.assign(List.of(tp));
                consumer.seekToBeginning(List.of(tp));
                long deadline = System.currentTimeMillis() + 20000;
                while (got.size() < 5 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                        got.add(r.value());
                    }
                }
            }
            for (String v : got) {
                System.out.println(v);
            }
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
