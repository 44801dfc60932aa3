package jockopy.groups;

import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Group consumer worker on the Java client (classic protocol) for tests/groups.
 *
 * Usage: GroupClient --bootstrap H:P --topic T --group G --out FILE
 *        [--instance-id ID] [--assignor range|cooperative] [--session-timeout-ms N]
 *        [--protocol classic|consumer] [--remote-assignor uniform|range]
 *        [--topic-pattern REGEX]
 * With --protocol consumer (KIP-848, kafka-clients 4.x) the broker assigns: the
 * session timeout, heartbeat interval and assignors are the broker's.
 *
 * Output lines, flushed one by one (same as tests/groups/workers/common.py):
 *   A p,p,...   whole assignment after every change
 *   R partition offset value   a processed record (before the commit)
 *   C           commit of everything processed so far succeeded
 *   READY / CLOSED
 * SIGTERM: wake the poll loop, commit, close (leaves the group unless static), exit.
 */
public final class GroupClient {
    private GroupClient() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        PrintWriter out = new PrintWriter(new FileWriter(a.get("out"), true), true);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.get("group"));
        boolean consumerProtocol = "consumer".equals(a.getOrDefault("protocol", "classic"));
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, consumerProtocol ? "consumer" : "classic");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (!consumerProtocol) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, a.getOrDefault("session-timeout-ms", "6000"));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        } else if (a.containsKey("remote-assignor")) {
            p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, a.get("remote-assignor"));
        }
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "2000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (a.containsKey("instance-id")) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, a.get("instance-id"));
        }
        boolean coop = "cooperative".equals(a.getOrDefault("assignor", "range"));
        if (!consumerProtocol) {
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                  coop ? CooperativeStickyAssignor.class.getName() : RangeAssignor.class.getName());
        }

        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
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
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                writeAssignment(out, consumer);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                writeAssignment(out, consumer);
            }
        };
        if (a.containsKey("topic-pattern")) {
            consumer.subscribe(java.util.regex.Pattern.compile(a.get("topic-pattern")), listener);
        } else {
            consumer.subscribe(Collections.singletonList(a.get("topic")), listener);
        }
        out.println("READY");
        try {
            while (true) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                int n = 0;
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    String v = r.value() == null ? "-" : new String(r.value(), "UTF-8");
                    out.println("R " + r.partition() + " " + r.offset() + " " + v);
                    n++;
                }
                if (n > 0) {
                    try {
                        consumer.commitSync();
                        out.println("C");
                    } catch (CommitFailedException e) {
                        out.println("F " + e.getMessage().replace('\n', ' '));
                    }
                }
            }
        } catch (WakeupException e) {
            // clean stop requested
        } finally {
            try {
                consumer.commitSync();
            } catch (RuntimeException e) {
                out.println("F " + e);
            }
            consumer.close(Duration.ofSeconds(10));
            out.println("CLOSED");
            done.countDown();
        }
    }

    private static void writeAssignment(PrintWriter out, KafkaConsumer<byte[], byte[]> c) {
        List<Integer> ps = new ArrayList<>();
        for (TopicPartition tp : c.assignment()) {
            ps.add(tp.partition());
        }
        Collections.sort(ps);
        StringBuilder sb = new StringBuilder("A ");
        for (int i = 0; i < ps.size(); i++) {
            if (i > 0) {
                sb.append(',');
            }
            sb.append(ps.get(i));
        }
        out.println(sb);
    }
}
