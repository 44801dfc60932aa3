// Small Java helpers for the jocko-py benchmark, run against both brokers with the same
// kafka-clients jar as the stock Kafka tools:
//
//   first-produce <bootstrap> <topic> <timeout-ms>
//       Prints READY once the JVM is warm, waits for a line on stdin (the driver writes one
//       right after spawning the broker), then sends one record until it is acknowledged and
//       prints "ACKED <ms since GO>". The topic is auto-created by the Metadata request, as a
//       default Kafka producer would do it.
//
//   ready <bootstrap> <topic> <partitions> <timeout-ms>
//       Sends one small record to every partition of a just-created topic and waits until all
//       are acknowledged (the client retries NOT_LEADER / UNKNOWN_TOPIC while the broker is
//       still creating the partitions' logs). Prints "TOPIC_READY <ms>".
//
//   e2e <bootstrap> <topic> <rate/s> <seconds> <record-size> <acks> <discard-s> <warmup-records>
//       Open-loop end-to-end latency at a fixed rate. First a warm-up: <warmup-records> records
//       sent as fast as the producer takes them and read back by the consumer (both the produce
//       and the fetch path of the broker, and the client JVM, run hot before the clock starts;
//       the same record count on every broker). Then one thread sends a record every 1/rate s
//       for <seconds> s; each record carries its *scheduled* send time, its actual send time and
//       its sequence number. A consumer in the same JVM (assign, from the end) computes receive
//       time minus scheduled time (the reported figure: a client-side stall delays every record
//       scheduled during it, so stalls are not hidden - no coordinated omission) and receive
//       time minus actual send time (reported as send_*). Same monotonic clock, microsecond
//       resolution; the first <discard-s> s of the measured phase are discarded. Prints one
//       "E2E ..." line with percentiles in ms.
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collections;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class BenchTool {
    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            usage();
        }
        switch (args[0]) {
            case "first-produce":
                firstProduce(args[1], args[2], Long.parseLong(args[3]));
                break;
            case "ready":
                ready(args[1], args[2], Integer.parseInt(args[3]), Long.parseLong(args[4]));
                break;
            case "e2e":
                e2e(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                    Integer.parseInt(args[5]), args[6], Integer.parseInt(args[7]),
                    args.length > 8 ? Integer.parseInt(args[8]) : 0);
                break;
            default:
                usage();
        }
    }

    private static void usage() {
        System.err.println("usage: BenchTool first-produce BOOTSTRAP TOPIC TIMEOUT_MS | "
            + "e2e BOOTSTRAP TOPIC RATE SECONDS SIZE ACKS DISCARD_S [WARMUP_RECORDS]");
        System.exit(2);
    }

    private static Properties producerProps(String bootstrap, String acks) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", acks);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        return p;
    }

    private static void firstProduce(String bootstrap, String topic, long timeoutMs)
            throws Exception {
        Properties p = producerProps(bootstrap, "1");
        // Poll the not-yet-listening broker often so the measurement resolution is ~10 ms.
        p.put("reconnect.backoff.ms", "5");
        p.put("reconnect.backoff.max.ms", "20");
        p.put("retry.backoff.ms", "10");
        p.put("retry.backoff.max.ms", "20");
        p.put("socket.connection.setup.timeout.ms", "1000");
        p.put("socket.connection.setup.timeout.max.ms", "1000");
        p.put("request.timeout.ms", "5000");
        p.put("delivery.timeout.ms", String.valueOf(timeoutMs));
        p.put("max.block.ms", String.valueOf(timeoutMs));
        p.put("metadata.max.age.ms", "100");
        byte[] value = "first".getBytes();
        // Load every class the measured path needs before the clock starts.
        new ProducerRecord<byte[], byte[]>(topic, value).hashCode();
        System.out.println("READY");
        System.out.flush();
        if (System.in.read() < 0) {
            System.exit(3);
        }
        long t0 = System.nanoTime();
        long deadline = t0 + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        Exception last = null;
        while (System.nanoTime() < deadline) {
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
                producer.send(new ProducerRecord<>(topic, value)).get(Math.max(1, left),
                    TimeUnit.MILLISECONDS);
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                System.out.println("ACKED " + ms);
                System.out.flush();
                return;
            } catch (Exception e) {
                last = e;
                Thread.sleep(10);
            }
        }
        System.out.println("FAILED " + last);
        System.exit(1);
    }

    private static void ready(String bootstrap, String topic, int partitions, long timeoutMs)
            throws Exception {
        Properties p = producerProps(bootstrap, "1");
        p.put("retry.backoff.ms", "20");
        p.put("delivery.timeout.ms", String.valueOf(timeoutMs));
        p.put("request.timeout.ms", String.valueOf(Math.min(timeoutMs, 30000)));
        p.put("max.block.ms", String.valueOf(timeoutMs));
        long t0 = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            java.util.List<java.util.concurrent.Future<?>> acks = new java.util.ArrayList<>();
            for (int i = 0; i < partitions; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, i, null, "ready".getBytes())));
            }
            for (java.util.concurrent.Future<?> f : acks) {
                long left = timeoutMs - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                f.get(Math.max(1, left), TimeUnit.MILLISECONDS);
            }
        }
        System.out.println("TOPIC_READY " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
        System.out.flush();
    }

    private static void e2e(String bootstrap, String topic, int rate, int seconds, int size,
                            String acks, int discardS, int warmupRecords) throws Exception {
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("key.deserializer", ByteArrayDeserializer.class.getName());
        cp.put("value.deserializer", ByteArrayDeserializer.class.getName());
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "latest");
        TopicPartition tp = new TopicPartition(topic, 0);
        int total = rate * seconds;
        int warm = rate * discardS;
        long[] lat = new long[total];      // receive - scheduled send time
        long[] sendLat = new long[total];  // receive - actual send time
        AtomicLong received = new AtomicLong();
        AtomicLong warmReceived = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp);
        consumer.assign(Collections.singletonList(tp));
        consumer.seekToEnd(Collections.singletonList(tp));
        long startOffset = consumer.position(tp);
        Thread reader = new Thread(() -> {
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(100));
                long now = System.nanoTime();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    ByteBuffer b = ByteBuffer.wrap(r.value());
                    long scheduled = b.getLong();
                    long sent = b.getLong();
                    int seq = b.getInt();
                    if (seq >= 0 && seq < total) {
                        lat[seq] = now - scheduled;
                        sendLat[seq] = now - sent;
                        received.incrementAndGet();
                    } else {
                        warmReceived.incrementAndGet();
                    }
                }
            }
            consumer.close();
        }, "e2e-consumer");
        reader.start();
        int len = Math.max(size, 20);
        long warmMs = 0;
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(producerProps(bootstrap, acks))) {
            if (warmupRecords > 0) {
                long w0 = System.nanoTime();
                for (int i = 0; i < warmupRecords; i++) {
                    byte[] v = new byte[len];
                    ByteBuffer b = ByteBuffer.wrap(v);
                    b.putLong(0L);
                    b.putLong(0L);
                    b.putInt(-1);
                    producer.send(new ProducerRecord<>(topic, 0, null, v));
                }
                producer.flush();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (warmReceived.get() < warmupRecords && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
                warmMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - w0);
                Thread.sleep(1000);  // let the broker and the consumer settle
            }
            long interval = 1_000_000_000L / rate;
            long next = System.nanoTime();
            for (int i = 0; i < total; i++) {
                long wait = next - System.nanoTime();
                if (wait > 0) {
                    TimeUnit.NANOSECONDS.sleep(wait);
                }
                byte[] v = new byte[len];
                ByteBuffer b = ByteBuffer.wrap(v);
                b.putLong(next);
                b.putLong(System.nanoTime());
                b.putInt(i);
                producer.send(new ProducerRecord<>(topic, 0, null, v));
                next += interval;
            }
            producer.flush();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (received.get() < total && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        stop.set(true);
        reader.join(10_000);
        long[] got = measured(lat, warm, total);
        long[] gotSend = measured(sendLat, warm, total);
        int n = got.length;
        System.out.printf("E2E sent=%d received=%d measured=%d start_offset=%d "
                + "p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f avg_ms=%.3f "
                + "send_p50_ms=%.3f send_p99_ms=%.3f send_p999_ms=%.3f send_max_ms=%.3f "
                + "warmup_records=%d warmup_received=%d warmup_ms=%d%n",
            total, received.get(), n, startOffset, pct(got, 50), pct(got, 99), pct(got, 99.9),
            n > 0 ? got[n - 1] / 1e6 : Double.NaN, avg(got),
            pct(gotSend, 50), pct(gotSend, 99), pct(gotSend, 99.9),
            gotSend.length > 0 ? gotSend[gotSend.length - 1] / 1e6 : Double.NaN,
            warmupRecords, warmReceived.get(), warmMs);
        System.out.flush();
        if (n < (total - warm) * 0.99) {
            System.exit(1);
        }
    }

    private static long[] measured(long[] lat, int from, int to) {
        int n = 0;
        long[] xs = new long[to - from];
        for (int i = from; i < to; i++) {
            if (lat[i] > 0) {
                xs[n++] = lat[i];
            }
        }
        long[] got = Arrays.copyOf(xs, n);
        Arrays.sort(got);
        return got;
    }

    private static double pct(long[] sorted, double p) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        int idx = (int) Math.ceil(p / 100.0 * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, idx))] / 1e6;
    }

    private static double avg(long[] xs) {
        if (xs.length == 0) {
            return Double.NaN;
        }
        double s = 0;
        for (long x : xs) {
            s += x;
        }
        return s / xs.length / 1e6;
    }
}
