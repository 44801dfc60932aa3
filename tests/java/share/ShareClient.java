import java.io.FileWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Share-group worker on the Java client 4.4.0 (KafkaShareConsumer, KIP-932) for tests/share
 * and bench/share.py.
 *
 *   ShareClient config  --bootstrap H:P --group G k=v ...
 *       IncrementalAlterConfigs SET on the GROUP resource G (share.record.lock.duration.ms,
 *       share.auto.offset.reset, ...); prints OK.
 *   ShareClient produce --bootstrap H:P --topic T --values FILE
 *       one record per line of FILE (its value), in order, to partition 0, acks=all; prints
 *       "PRODUCED n".
 *   ShareClient consume --bootstrap H:P --topic T --group G --out FILE [--hold 1]
 *       [--max-poll N] [--quiet 1] [--pause-ms N] [--acquire-mode record_limit]
 *       A KafkaShareConsumer in explicit acknowledgement mode. The action for a record is
 *       chosen from its value's prefix:
 *         "a-..."  accept
 *         "r1-..." release on the first delivery, accept afterwards
 *         "rl-..." release every time (archived at group.share.delivery.count.limit)
 *         "rj-..." reject
 *       With --hold 1 the first non-empty poll is printed and nothing is acknowledged: the
 *       worker prints HELD and sleeps (the test SIGKILLs it while it holds the records).
 *       With --quiet 1 no R lines (bench/share.py counts C lines); --pause-ms N sleeps
 *       after each commit (a slow consumer: tests/share/share_cluster.py).
 *
 * Output lines of consume, flushed one by one:
 *   READY
 *   R partition offset deliveryCount action value   a record and what it was acknowledged with
 *   C n millis           commitSync of the acknowledgements of the last n records succeeded
 *                        (at that wall-clock time)
 *   E partition message  commitSync reported an error for a partition (those records did not count)
 *   HELD / CLOSED
 * SIGTERM: wake the poll loop, commit what was acknowledged, close, exit.
 */
public final class ShareClient {
    private ShareClient() {}

    public static void main(String[] argv) throws Exception {
        String mode = argv[0];
        Map<String, String> a = new HashMap<>();
        List<String> rest = new ArrayList<>();
        for (int i = 1; i < argv.length; i++) {
            if (argv[i].startsWith("--") && i + 1 < argv.length) {
                a.put(argv[i].substring(2), argv[i + 1]);
                i++;
            } else {
                rest.add(argv[i]);
            }
        }
        switch (mode) {
            case "config":
                config(a, rest);
                break;
            case "produce":
                produce(a);
                break;
            case "consume":
                consume(a);
                break;
            default:
                System.err.println("ShareClient: unknown mode " + mode);
                System.exit(2);
        }
    }

    private static void config(Map<String, String> a, List<String> kvs) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
        try (Admin admin = Admin.create(p)) {
            List<AlterConfigOp> ops = new ArrayList<>();
            for (String kv : kvs) {
                String[] s = kv.split("=", 2);
                ops.add(new AlterConfigOp(new ConfigEntry(s[0], s[1]), AlterConfigOp.OpType.SET));
            }
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, a.get("group"));
            Map<ConfigResource, Collection<AlterConfigOp>> req = new HashMap<>();
            req.put(res, ops);
            admin.incrementalAlterConfigs(req).all().get();
        }
        System.out.println("OK");
    }

    private static void produce(Map<String, String> a) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        List<String> values = Files.readAllLines(Paths.get(a.get("values")), StandardCharsets.UTF_8);
        try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p)) {
            for (String v : values) {
                prod.send(new ProducerRecord<>(a.get("topic"), 0, null, v.getBytes(StandardCharsets.UTF_8)));
            }
            prod.flush();
        }
        System.out.println("PRODUCED " + values.size());
    }

    static AcknowledgeType action(String value, int deliveryCount) {
        if (value.startsWith("rj-")) {
            return AcknowledgeType.REJECT;
        }
        if (value.startsWith("rl-")) {
            return AcknowledgeType.RELEASE;
        }
        if (value.startsWith("r1-")) {
            return deliveryCount <= 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
        }
        return AcknowledgeType.ACCEPT;
    }

    private static void consume(Map<String, String> a) throws Exception {
        PrintWriter out = new PrintWriter(new FileWriter(a.get("out"), true), true);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.get("group"));
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, a.getOrDefault("max-poll", "100"));
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "2000");
        if (a.containsKey("acquire-mode")) {  // record_limit: at most max.poll.records a poll
            p.put("share.acquire.mode", a.get("acquire-mode"));
        }
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        boolean hold = "1".equals(a.get("hold"));
        boolean quiet = "1".equals(a.get("quiet"));
        long pauseMs = Long.parseLong(a.getOrDefault("pause-ms", "0"));

        KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p);
        CountDownLatch done = new CountDownLatch(1);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                done.await();
                main.join(20000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        consumer.subscribe(Collections.singletonList(a.get("topic")));
        out.println("READY");
        long delivered = 0;
        long acked = 0;
        try {
            while (true) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(200));
                int n = 0;
                for (ConsumerRecord<String, String> r : recs) {
                    Optional<Short> dc = r.deliveryCount();
                    int count = dc.isPresent() ? dc.get() : -1;
                    String v = r.value() == null ? "-" : r.value();
                    AcknowledgeType t = action(v, count);
                    if (!hold) {
                        consumer.acknowledge(r, t);
                    }
                    if (!quiet) {
                        out.println("R " + r.partition() + " " + r.offset() + " " + count + " "
                                    + t.toString().toLowerCase() + " " + v);
                    }
                    n++;
                }
                delivered += n;
                if (n > 0 && hold) {
                    out.println("HELD");
                    Thread.sleep(Long.MAX_VALUE);
                }
                if (n > 0) {
                    Map<TopicIdPartition, Optional<KafkaException>> res = consumer.commitSync();
                    boolean ok = true;
                    for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : res.entrySet()) {
                        if (e.getValue().isPresent()) {
                            ok = false;
                            out.println("E " + e.getKey().partition() + " "
                                        + String.valueOf(e.getValue().get()).replace('\n', ' '));
                        }
                    }
                    if (ok) {
                        acked += n;
                        out.println("C " + n + " " + System.currentTimeMillis());
                    }
                    if (pauseMs > 0) {
                        Thread.sleep(pauseMs);
                    }
                }
            }
        } catch (WakeupException e) {
            // clean stop requested
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            try {
                consumer.close(Duration.ofSeconds(10));
            } catch (RuntimeException e) {
                out.println("E -1 " + e);
            }
            out.println("CLOSED " + delivered + " " + acked);
            done.countDown();
        }
    }
}
