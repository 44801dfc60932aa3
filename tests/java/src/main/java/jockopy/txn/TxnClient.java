package jockopy.txn;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Transactional Java client for tests/transactions (kafka-clients 3.9 or 4.x).
 *
 * copy BOOTSTRAP INPUT OUTPUT GROUP TXN_ID N
 *   consume-transform-produce: a read_committed group consumer on INPUT, a
 *   transactional producer writing "out-" + value to OUTPUT (same partition) and
 *   sendOffsetsToTransaction for the consumed offsets. Every third transaction is
 *   aborted on purpose and the consumer rewound to the group's committed offsets, so
 *   those records are copied again by a later, committed transaction. Stops once N
 *   records have been copied in committed transactions. Prints "COMMITTED n ABORTED m".
 * read BOOTSTRAP TOPIC N
 *   a read_committed consumer (assign, from the beginning) prints every value, one a
 *   line, until N came and 2 s passed without more (or 60 s in all).
 */
public final class TxnClient {
    private TxnClient() {}

    public static void main(String[] a) throws Exception {
        if (a[0].equals("copy")) {
            copy(a[1], a[2], a[3], a[4], a[5], Integer.parseInt(a[6]));
        } else {
            read(a[1], a[2], Integer.parseInt(a[3]));
        }
    }

    private static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        }
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "40");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    private static void copy(String bootstrap, String input, String output, String group,
                             String txnId, int n) {
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        int committed = 0;
        int aborted = 0;
        int txns = 0;
        long deadline = System.currentTimeMillis() + 120_000;
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, group);
             KafkaProducer<byte[], byte[]> p =
                 new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
            p.initTransactions();
            c.subscribe(Collections.singletonList(input));
            while (committed < n) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("copied only " + committed + " of " + n);
                }
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    continue;
                }
                txns++;
                boolean abort = txns % 3 == 0;
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    byte[] v = ("out-" + new String(r.value())).getBytes();
                    p.send(new ProducerRecord<>(output, r.partition(), r.key(), v));
                    offsets.put(new TopicPartition(r.topic(), r.partition()),
                                new OffsetAndMetadata(r.offset() + 1));
                }
                p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                if (abort) {
                    p.flush();
                    p.abortTransaction();
                    aborted += recs.count();
                    // rewind to what the group has committed: copy those records again
                    Map<TopicPartition, OffsetAndMetadata> done = c.committed(c.assignment());
                    for (TopicPartition tp : c.assignment()) {
                        OffsetAndMetadata om = done.get(tp);
                        c.seek(tp, om == null ? 0 : om.offset());
                    }
                } else {
                    p.commitTransaction();
                    committed += recs.count();
                }
            }
        }
        System.out.println("COMMITTED " + committed + " ABORTED " + aborted);
    }

    private static void read(String bootstrap, String topic, int n) {
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, null)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic)) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            int got = 0;
            long end = System.currentTimeMillis() + 60_000;
            long quietUntil = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(end, quietUntil)) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    System.out.println(new String(r.value()));
                    got++;
                }
                if (got >= n && !recs.isEmpty()) {
                    quietUntil = System.currentTimeMillis() + 2_000;
                }
            }
        }
    }
}
