/* A librdkafka producer with as little work of its own per record as librdkafka allows,
 * for bench/shards.py (--client lean): the bench's producers share the machine's two
 * cores with the broker, so every CPU-second they spend is one the broker does not get.
 *
 * Each record is the same SIZE-byte buffer, handed to rd_kafka_produce without
 * RD_KAFKA_MSG_F_COPY (librdkafka still copies it into the batch it sends), to partition
 * i % PARTITIONS; delivery reports count failures only (delivery.report.only.error).
 * A warm-up of WARMUP records first, then RECORDS timed ones, each part flushed.
 * Prints one JSON line: start and end (Unix time, s), records, bytes, errors.
 *
 *   lean_producer BOOTSTRAP TOPIC PARTITIONS RECORDS SIZE WARMUP [librdkafka k=v ...]
 *
 * Built by `make -C bench lean-producer` (gcc, librdkafka-dev).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <librdkafka/rdkafka.h>

static long failed = 0;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    if (m->err)
        failed++;
}

static double now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec / 1e6;
}

static int send_records(rd_kafka_t *rk, rd_kafka_topic_t *topic, int partitions, long n,
                        char *value, size_t size) {
    for (long i = 0; i < n; i++) {
        while (rd_kafka_produce(topic, (int32_t)(i % partitions), 0, value, size, NULL, 0,
                                NULL) == -1) {
            rd_kafka_resp_err_t err = rd_kafka_last_error();
            if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                fprintf(stderr, "lean_producer: produce failed: %s\n", rd_kafka_err2str(err));
                return -1;
            }
            rd_kafka_poll(rk, 10);
        }
        if (i % 1000 == 0)
            rd_kafka_poll(rk, 0);
    }
    if (rd_kafka_flush(rk, 120000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf(stderr, "lean_producer: flush timed out\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    char err[512];
    if (argc < 7) {
        fprintf(stderr, "usage: lean_producer BOOTSTRAP TOPIC PARTITIONS RECORDS SIZE WARMUP "
                        "[k=v ...]\n");
        return 2;
    }
    int partitions = atoi(argv[3]);
    long records = atol(argv[4]);
    size_t size = (size_t)atol(argv[5]);
    long warmup = atol(argv[6]);
    if (partitions <= 0 || records <= 0 || size == 0 || warmup < 0) {
        fprintf(stderr, "lean_producer: PARTITIONS, RECORDS and SIZE must be positive\n");
        return 2;
    }
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], err, sizeof err) ||
        rd_kafka_conf_set(conf, "delivery.report.only.error", "true", err, sizeof err)) {
        fprintf(stderr, "lean_producer: %s\n", err);
        return 2;
    }
    for (int i = 7; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "lean_producer: expected k=v, got %s\n", argv[i]);
            return 2;
        }
        *eq = '\0';
        if (rd_kafka_conf_set(conf, argv[i], eq + 1, err, sizeof err)) {
            fprintf(stderr, "lean_producer: %s\n", err);
            return 2;
        }
    }
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "lean_producer: %s\n", err);
        return 1;
    }
    rd_kafka_topic_t *topic = rd_kafka_topic_new(rk, argv[2], NULL);
    char *value = malloc(size);
    for (size_t i = 0; i < size; i++)
        value[i] = (char)('a' + rand() % 26);
    if (warmup && send_records(rk, topic, partitions, warmup, value, size))
        return 1;
    double start = now();
    if (send_records(rk, topic, partitions, records, value, size))
        return 1;
    double end = now();
    printf("{\"start\": %.6f, \"end\": %.6f, \"records\": %ld, \"bytes\": %ld, "
           "\"errors\": %ld}\n", start, end, records, (long)(records * size), failed);
    rd_kafka_topic_destroy(topic);
    rd_kafka_destroy(rk);
    free(value);
    return failed ? 1 : 0;
}
