// A KafkaShareConsumer (kafka-clients 4.4.0, KIP-932) for tests/share: run with
//   java -cp '<kafka-44-jars>/*:<classes>' ShareWorker <bootstrap> <group> <topic> <out>
// Explicit acknowledgement; what it does with a record depends on the record's value:
//   "rel1-*"   released at its first delivery, accepted at the next
//   "relall-*" released at every delivery (archived by the broker after the limit)
//   "rej-*"    rejected
//   anything else accepted
// Output lines, flushed one by one:
//   D offset deliveryCount value   a delivery (before acknowledging)
//   A offset value                 an accept whose commitSync succeeded
//   X offset message               an acknowledgement the commit failed for
//   READY once subscribed, CLOSED after a clean close (SIGTERM)
import java.io.FileWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ShareWorker {
    private ShareWorker() {}

    public static void main(String[] args) throws Exception {
        PrintWriter out = new PrintWriter(new FileWriter(args[3], true), true);
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("group.id", args[1]);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        p.put("client.id", "share-worker-" + ProcessHandle.current().pid());
        KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p);
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            c.wakeup();
            try {
                done.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        try {
            c.subscribe(Set.of(args[2]));
            out.println("READY");
            while (true) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(500));
                List<ConsumerRecord<byte[], byte[]>> accepted = new ArrayList<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    String v = new String(r.value(), StandardCharsets.UTF_8);
                    short dc = r.deliveryCount().orElse((short) -1);
                    out.println("D " + r.offset() + " " + dc + " " + v);
                    AcknowledgeType t;
                    if (v.startsWith("rel1-") && dc == 1) {
                        t = AcknowledgeType.RELEASE;
                    } else if (v.startsWith("relall-")) {
                        t = AcknowledgeType.RELEASE;
                    } else if (v.startsWith("rej-")) {
                        t = AcknowledgeType.REJECT;
                    } else {
                        t = AcknowledgeType.ACCEPT;
                        accepted.add(r);
                    }
                    c.acknowledge(r, t);
                }
                if (recs.isEmpty()) {
                    continue;
                }
                Map<TopicIdPartition, Optional<KafkaException>> res = c.commitSync();
                for (ConsumerRecord<byte[], byte[]> r : accepted) {
                    Optional<KafkaException> err = Optional.empty();
                    for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : res.entrySet()) {
                        if (e.getKey().topicPartition().partition() == r.partition()) {
                            err = e.getValue();
                        }
                    }
                    if (err.isPresent()) {
                        out.println("X " + r.offset() + " " + err.get());
                    } else {
                        out.println("A " + r.offset() + " "
                            + new String(r.value(), StandardCharsets.UTF_8));
                    }
                }
            }
        } catch (WakeupException e) {
            // SIGTERM
        } finally {
            c.close();
            out.println("CLOSED");
            out.close();
            done.countDown();
        }
    }
}
