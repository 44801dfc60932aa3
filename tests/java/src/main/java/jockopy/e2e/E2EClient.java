package jockopy.e2e;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java side of the jocko-py end-to-end tests (tests/clients/test_java_clients.py).
 *
 * <p>One JVM per phase, all codecs at once, so the JVM start-up is paid a few times, not
 * per record. Records travel in the TSV format of tests/support/e2e.py: one record per line,
 * {@code topic partition offset timestamp timestampType key value nHeaders [hKey hValue]...},
 * key/value/header keys/header values base64, "-" for null.
 *
 * <pre>
 * produce BOOTSTRAP CODEC=IN.tsv [CODEC=IN.tsv ...]
 *     one KafkaProducer per codec with compression.type=CODEC and otherwise default settings
 *     (so enable.idempotence=true, acks=all); sends every record of IN.tsv to its partition
 *     with its key, value, headers and timestamp; exits 1 if any send failed.
 * consume BOOTSTRAP OUT.tsv TOPIC:PARTITIONS [TOPIC:PARTITIONS ...]
 *     one KafkaConsumer without group.id; assign() every partition, seekToBeginning, read up
 *     to the end offsets taken at the start, write what was read to OUT.tsv.
 * produce-paced BOOTSTRAP EVERY PAUSE_MS IN.tsv
 *     one KafkaProducer with default settings (enable.idempotence=true, acks=all) sends the
 *     records of IN.tsv in order, sleeping PAUSE_MS after every EVERY records, and prints
 *     "acked N" (flushed) each time another 100 records are acknowledged, so that a test can
 *     kill a broker mid-stream; exits 1 if any send failed.
 * offsets-for-times BOOTSTRAP QUERIES.tsv OUT.tsv
 *     QUERIES lines: topic partition timestamp; OUT lines: topic partition timestamp offset
 *     recordTimestamp (-1 -1 when offsetsForTimes returned null).
 * </pre>
 */
public final class E2EClient {
    private static final Duration API_TIMEOUT = Duration.ofSeconds(60);
    private static final long READ_DEADLINE_MS = 180_000;

    private E2EClient() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            usage();
        }
        String mode = args[0];
        String bootstrap = args[1];
        switch (mode) {
            case "produce":
                produce(bootstrap, args);
                break;
            case "produce-paced":
                producePaced(bootstrap, args);
                break;
            case "consume":
                consume(bootstrap, args);
                break;
            case "offsets-for-times":
                offsetsForTimes(bootstrap, args);
                break;
            default:
                usage();
        }
    }

    private static void usage() {
        System.err.println("usage: E2EClient produce|produce-paced|consume|offsets-for-times BOOTSTRAP ...");
        System.exit(2);
    }

    // ------------------------------------------------------------------ produce

    private static void produce(String bootstrap, String[] args) throws Exception {
        boolean failed = false;
        for (int i = 2; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            String codec = kv[0];
            List<String> lines = Files.readAllLines(Paths.get(kv[1]), StandardCharsets.US_ASCII);
            Properties props = new Properties();
            props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            props.put(ProducerConfig.CLIENT_ID_CONFIG, "jocko-e2e-java-producer-" + codec);
            AtomicLong acked = new AtomicLong();
            AtomicReference<Exception> firstError = new AtomicReference<>();
            long start = System.currentTimeMillis();
            try (KafkaProducer<byte[], byte[]> producer =
                    new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
                for (String line : lines) {
                    if (line.isEmpty()) {
                        continue;
                    }
                    producer.send(record(line), (md, ex) -> {
                        if (ex != null) {
                            firstError.compareAndSet(null, ex);
                        } else {
                            acked.incrementAndGet();
                        }
                    });
                }
                producer.flush();
            }
            long ms = System.currentTimeMillis() - start;
            System.out.printf("produced codec=%s records=%d acked=%d ms=%d%n",
                    codec, lines.size(), acked.get(), ms);
            if (firstError.get() != null) {
                System.err.printf("codec=%s: send failed: %s%n", codec, firstError.get());
                failed = true;
            } else if (acked.get() != lines.size()) {
                System.err.printf("codec=%s: %d of %d acked%n", codec, acked.get(), lines.size());
                failed = true;
            }
        }
        System.exit(failed ? 1 : 0);
    }

    private static ProducerRecord<byte[], byte[]> record(String line) throws IOException {
        String[] c = line.split("\t", -1);
        List<Header> headers = new ArrayList<>();
        int nh = Integer.parseInt(c[7]);
        for (int h = 0; h < nh; h++) {
            byte[] hk = unb64(c[8 + 2 * h]);
            headers.add(new RecordHeader(new String(hk, StandardCharsets.UTF_8), unb64(c[9 + 2 * h])));
        }
        return new ProducerRecord<>(c[0], Integer.parseInt(c[1]), Long.parseLong(c[3]),
                unb64(c[5]), unb64(c[6]), headers);
    }

    private static void producePaced(String bootstrap, String[] args) throws Exception {
        int every = Integer.parseInt(args[2]);
        long pauseMs = Long.parseLong(args[3]);
        List<String> lines = new ArrayList<>();
        for (String l : Files.readAllLines(Paths.get(args[4]), StandardCharsets.US_ASCII)) {
            if (!l.isEmpty()) {
                lines.add(l);
            }
        }
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "jocko-e2e-java-producer-paced");
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicReference<Exception> firstError = new AtomicReference<>();
        long start = System.currentTimeMillis();
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            int sent = 0;
            for (String line : lines) {
                producer.send(record(line), (md, ex) -> {
                    if (ex != null) {
                        failed.incrementAndGet();
                        firstError.compareAndSet(null, ex);
                    } else if (acked.incrementAndGet() % 100 == 0) {
                        synchronized (System.out) {
                            System.out.println("acked " + acked.get());
                            System.out.flush();
                        }
                    }
                });
                if (++sent % every == 0) {
                    Thread.sleep(pauseMs);
                }
            }
            producer.flush();
        }
        System.out.printf("produced records=%d acked=%d failed=%d ms=%d%n", lines.size(),
                acked.get(), failed.get(), System.currentTimeMillis() - start);
        if (firstError.get() != null) {
            System.err.printf("%d sends failed, first: %s%n", failed.get(), firstError.get());
        }
        System.exit(failed.get() == 0 && acked.get() == lines.size() ? 0 : 1);
    }

    // ------------------------------------------------------------------ consume

    private static Properties consumerProps(String bootstrap) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "jocko-e2e-java-consumer");
        return props;
    }

    private static void consume(String bootstrap, String[] args) throws Exception {
        Path out = Paths.get(args[2]);
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 3; i < args.length; i++) {
            String[] tp = args[i].split(":", 2);
            int n = Integer.parseInt(tp[1]);
            for (int p = 0; p < n; p++) {
                tps.add(new TopicPartition(tp[0], p));
            }
        }
        long count = 0;
        long start = System.currentTimeMillis();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                    consumerProps(bootstrap), new ByteArrayDeserializer(), new ByteArrayDeserializer());
                BufferedWriter w = Files.newBufferedWriter(out, StandardCharsets.US_ASCII)) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, API_TIMEOUT);
            long deadline = start + READ_DEADLINE_MS;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (consumer.position(tp, API_TIMEOUT) < end.get(tp)) {
                        done = false;
                        break;
                    }
                }
                if (done) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    StringBuilder sb = new StringBuilder();
                    for (TopicPartition tp : tps) {
                        sb.append(String.format(" %s position=%d end=%d", tp,
                                consumer.position(tp, API_TIMEOUT), end.get(tp)));
                    }
                    System.err.println("timed out reading to the end offsets:" + sb);
                    System.exit(1);
                }
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    w.write(line(r));
                    w.write('\n');
                    count++;
                }
            }
        }
        System.out.printf("consumed records=%d ms=%d%n", count, System.currentTimeMillis() - start);
        System.exit(0);
    }

    private static String line(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder sb = new StringBuilder(256);
        sb.append(r.topic()).append('\t').append(r.partition()).append('\t').append(r.offset())
                .append('\t').append(r.timestamp()).append('\t').append(r.timestampType().id)
                .append('\t').append(b64(r.key())).append('\t').append(b64(r.value()));
        Header[] hs = r.headers().toArray();
        sb.append('\t').append(hs.length);
        for (Header h : hs) {
            sb.append('\t').append(b64(h.key().getBytes(StandardCharsets.UTF_8)))
                    .append('\t').append(b64(h.value()));
        }
        return sb.toString();
    }

    // ------------------------------------------------------------------ offsets-for-times

    private static void offsetsForTimes(String bootstrap, String[] args) throws Exception {
        Path queries = Paths.get(args[2]);
        Path out = Paths.get(args[3]);
        // A partition may be queried for several timestamps: one offsetsForTimes call per
        // round, each with at most one timestamp per partition.
        List<List<Object[]>> rounds = new ArrayList<>();
        Map<TopicPartition, Integer> seen = new HashMap<>();
        try (BufferedReader r = Files.newBufferedReader(queries, StandardCharsets.US_ASCII)) {
            String l;
            while ((l = r.readLine()) != null) {
                if (l.isEmpty()) {
                    continue;
                }
                String[] c = l.split("\t");
                TopicPartition tp = new TopicPartition(c[0], Integer.parseInt(c[1]));
                int round = seen.merge(tp, 1, Integer::sum) - 1;
                while (rounds.size() <= round) {
                    rounds.add(new ArrayList<>());
                }
                rounds.get(round).add(new Object[] {tp, Long.parseLong(c[2])});
            }
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                    consumerProps(bootstrap), new ByteArrayDeserializer(), new ByteArrayDeserializer());
                BufferedWriter w = Files.newBufferedWriter(out, StandardCharsets.US_ASCII)) {
            for (List<Object[]> round : rounds) {
                Map<TopicPartition, Long> q = new LinkedHashMap<>();
                for (Object[] e : round) {
                    q.put((TopicPartition) e[0], (Long) e[1]);
                }
                Map<TopicPartition, OffsetAndTimestamp> res = consumer.offsetsForTimes(q, API_TIMEOUT);
                for (Map.Entry<TopicPartition, Long> e : q.entrySet()) {
                    OffsetAndTimestamp ot = res.get(e.getKey());
                    w.write(String.format("%s\t%d\t%d\t%d\t%d%n", e.getKey().topic(),
                            e.getKey().partition(), e.getValue(),
                            ot == null ? -1L : ot.offset(), ot == null ? -1L : ot.timestamp()));
                }
            }
        }
        System.exit(0);
    }

    // ------------------------------------------------------------------ base64

    private static String b64(byte[] b) {
        return b == null ? "-" : Base64.getEncoder().encodeToString(b);
    }

    private static byte[] unb64(String s) throws IOException {
        return "-".equals(s) ? null : Base64.getDecoder().decode(s);
    }
}
