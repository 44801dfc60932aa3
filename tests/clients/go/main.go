// gokafka: the Go side of jocko-py's end-to-end client tests (tests/clients/test_go_clients.py).
//
// One program, three client libraries (-lib franz|sarama|kafkago), three modes:
//
//	produce  read records from a TSV file (tests/support/e2e.py write_tsv: explicit partition,
//	         key, value, headers, CreateTime timestamp) and produce them with -codec, acks=all
//	         and the library's idempotent producer where it has one; prints {"type":"produced"}.
//	         With -every N -pause D (a paced stream, for tests that kill a broker mid-stream):
//	         the records go in chunks of N (per partition for kafka-go) with a pause D after
//	         each, {"type":"acked","count":n} is printed as chunks are acknowledged, and the
//	         producer retries long enough to ride out a partition leader failover.
//	consume  assign partitions 0..-partitions-1 of -topic from the beginning (no group) and
//	         print every record until -n records were read.
//	group    join consumer group -group on -topic, print every record, commit what was
//	         processed; stops after -n records (0: never) or on SIGTERM/SIGINT, then commits,
//	         leaves the group and prints {"type":"done"}.
//
// Output (stdout) is one JSON object per line; key, value and header values are base64
// (null for a null key/value/header value). Every mode is bounded by -timeout: on timeout
// the program prints what it has, reports on stderr and exits 3. Errors exit 1.
// -debug turns on the library's debug logging (stderr).
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Record is one record as produced (from the TSV input) or as consumed.
type Record struct {
	Partition int32
	Offset    int64
	Timestamp int64 // ms since the epoch
	Key       []byte
	Value     []byte
	Headers   []Header
}

type Header struct {
	Key   string
	Value []byte
}

type options struct {
	lib        string
	mode       string
	brokers    []string
	topic      string
	codec      string
	in         string
	partitions int
	n          int
	group      string
	serverSide bool // group: KIP-848 consumer protocol (franz-go's ServerSideBalancer)
	timeout    time.Duration
	debug      bool
	every      int           // produce: records per paced chunk (0: not paced)
	pause      time.Duration // produce: pause after each paced chunk
}

var errTimeout = errors.New("timed out")

func main() {
	var o options
	var brokers string
	flag.StringVar(&o.lib, "lib", "", "franz | sarama | kafkago")
	flag.StringVar(&o.mode, "mode", "", "produce | consume | group")
	flag.StringVar(&brokers, "brokers", "127.0.0.1:9092", "bootstrap servers, comma separated")
	flag.StringVar(&o.topic, "topic", "", "topic")
	flag.StringVar(&o.codec, "codec", "none", "none | gzip | snappy | lz4 | zstd (produce)")
	flag.StringVar(&o.in, "in", "", "TSV file with the records to produce")
	flag.IntVar(&o.partitions, "partitions", 1, "consume: partitions 0..N-1 are assigned")
	flag.IntVar(&o.n, "n", 0, "consume/group: stop after this many records (group: 0 = until signalled)")
	flag.StringVar(&o.group, "group", "", "group: consumer group id")
	flag.BoolVar(&o.serverSide, "server-side", false, "group (franz): KIP-848 consumer protocol, the broker assigns")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Second, "upper bound on the whole run")
	flag.BoolVar(&o.debug, "debug", false, "library debug logging on stderr")
	flag.IntVar(&o.every, "every", 0, "produce: pace the stream, records per chunk (0: all at once)")
	flag.DurationVar(&o.pause, "pause", 0, "produce: pause after every paced chunk")
	flag.Parse()
	o.brokers = strings.Split(brokers, ",")
	if o.topic == "" {
		fail(2, "-topic is required")
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	// SIGTERM/SIGINT end a group member gracefully (commit, leave); other modes just stop.
	stop, stopCancel := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stopCancel()

	out := newPrinter()
	var err error
	switch o.mode {
	case "produce":
		var recs []Record
		recs, err = readTSV(o.in, o.topic)
		if err == nil {
			err = produce(ctx, o, recs, out)
			if err == nil {
				out.emit(map[string]any{"type": "produced", "count": len(recs)})
			}
		}
	case "consume":
		if o.n <= 0 {
			fail(2, "consume needs -n > 0")
		}
		err = consume(ctx, stop, o, out)
	case "group":
		if o.group == "" {
			fail(2, "group needs -group")
		}
		err = group(ctx, stop, o, out)
	default:
		fail(2, "unknown -mode "+o.mode)
	}
	out.flush()
	if errors.Is(err, errTimeout) || errors.Is(err, context.DeadlineExceeded) {
		fail(3, fmt.Sprintf("%s %s %s: timed out after %s: %v", o.lib, o.mode, o.topic, o.timeout, err))
	}
	if err != nil {
		fail(1, fmt.Sprintf("%s %s %s: %v", o.lib, o.mode, o.topic, err))
	}
}

func fail(code int, msg string) {
	fmt.Fprintln(os.Stderr, "gokafka:", msg)
	os.Exit(code)
}

func produce(ctx context.Context, o options, recs []Record, out *printer) error {
	switch o.lib {
	case "franz":
		return franzProduce(ctx, o, recs, out)
	case "sarama":
		return saramaProduce(ctx, o, recs, out)
	case "kafkago":
		return kafkagoProduce(ctx, o, recs, out)
	}
	return fmt.Errorf("unknown -lib %q", o.lib)
}

func consume(ctx, stop context.Context, o options, out *printer) error {
	switch o.lib {
	case "franz":
		return franzConsume(ctx, stop, o, out)
	case "sarama":
		return saramaConsume(ctx, stop, o, out)
	case "kafkago":
		return kafkagoConsume(ctx, stop, o, out)
	}
	return fmt.Errorf("unknown -lib %q", o.lib)
}

func group(ctx, stop context.Context, o options, out *printer) error {
	switch o.lib {
	case "franz":
		return franzGroup(ctx, stop, o, out)
	case "sarama":
		return saramaGroup(ctx, stop, o, out)
	case "kafkago":
		return kafkagoGroup(ctx, stop, o, out)
	}
	return fmt.Errorf("unknown -lib %q", o.lib)
}

// chunks splits recs into paced chunks of o.every records (one chunk when not paced).
func chunks[T any](o options, recs []T) [][]T {
	if o.every <= 0 {
		return [][]T{recs}
	}
	var out [][]T
	for len(recs) > o.every {
		out = append(out, recs[:o.every])
		recs = recs[o.every:]
	}
	return append(out, recs)
}

// pace sleeps o.pause between paced chunks (bounded by ctx).
func pace(ctx context.Context, o options) error {
	if o.every <= 0 || o.pause <= 0 {
		return nil
	}
	select {
	case <-time.After(o.pause):
		return nil
	case <-ctx.Done():
		return errTimeout
	}
}

// ---------------------------------------------------------------- output

// printer writes JSON lines to stdout from any goroutine and counts records.
type printer struct {
	mu      sync.Mutex
	w       *bufio.Writer
	records int
}

func newPrinter() *printer { return &printer{w: bufio.NewWriterSize(os.Stdout, 1<<16)} }

func b64(b []byte) any {
	if b == nil {
		return nil
	}
	return base64.StdEncoding.EncodeToString(b)
}

func (p *printer) emit(v map[string]any) {
	line, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.w.Write(line)
	p.w.WriteByte('\n')
	if v["type"] != "record" {
		p.w.Flush() // control lines reach the test at once
	}
}

// record prints one consumed record and returns how many were printed so far.
func (p *printer) record(r Record) int {
	headers := make([][2]any, 0, len(r.Headers))
	for _, h := range r.Headers {
		headers = append(headers, [2]any{h.Key, b64(h.Value)})
	}
	p.emit(map[string]any{
		"type": "record", "partition": r.Partition, "offset": r.Offset, "timestamp": r.Timestamp,
		"key": b64(r.Key), "value": b64(r.Value), "headers": headers,
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.records++
	if p.records%200 == 0 {
		p.w.Flush() // group tests watch progress while members run
	}
	return p.records
}

// acked reports, in a paced produce, how many records were acknowledged so far.
func (p *printer) acked(n int) {
	p.emit(map[string]any{"type": "acked", "count": n})
}

func (p *printer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.records
}

func (p *printer) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.w.Flush()
}

func (p *printer) assigned(parts []int32) {
	sorted := append([]int32(nil), parts...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	p.emit(map[string]any{"type": "assigned", "partitions": sorted})
}

// committed reports offsets (next offset to read, per partition) the library committed.
func (p *printer) committed(offsets map[int32]int64) {
	m := make(map[string]int64, len(offsets))
	for part, off := range offsets {
		m[strconv.Itoa(int(part))] = off
	}
	p.emit(map[string]any{"type": "committed", "offsets": m})
}

// ---------------------------------------------------------------- TSV input

func unb64(s string) ([]byte, error) {
	if s == "-" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if b == nil && err == nil {
		b = []byte{}
	}
	return b, err
}

// readTSV reads tests/support/e2e.py's record format:
// topic partition offset timestamp timestamp_type key value nheaders [hkey hvalue]...
func readTSV(path, topic string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for line := 1; sc.Scan(); line++ {
		cols := strings.Split(sc.Text(), "\t")
		bad := func(err error) error { return fmt.Errorf("%s line %d: %v", path, line, err) }
		if len(cols) < 8 {
			return nil, bad(errors.New("fewer than 8 columns"))
		}
		if cols[0] != topic {
			return nil, bad(fmt.Errorf("topic %q, want %q", cols[0], topic))
		}
		var r Record
		p, err1 := strconv.Atoi(cols[1])
		ts, err2 := strconv.ParseInt(cols[3], 10, 64)
		nh, err3 := strconv.Atoi(cols[7])
		key, err4 := unb64(cols[5])
		val, err5 := unb64(cols[6])
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return nil, bad(err)
		}
		if len(cols) != 8+2*nh {
			return nil, bad(fmt.Errorf("%d columns for %d headers", len(cols), nh))
		}
		r.Partition, r.Timestamp, r.Key, r.Value, r.Offset = int32(p), ts, key, val, -1
		for h := 0; h < nh; h++ {
			hk, err1 := unb64(cols[8+2*h])
			hv, err2 := unb64(cols[9+2*h])
			if err := errors.Join(err1, err2); err != nil {
				return nil, bad(err)
			}
			r.Headers = append(r.Headers, Header{Key: string(hk), Value: hv})
		}
		recs = append(recs, r)
	}
	return recs, sc.Err()
}
