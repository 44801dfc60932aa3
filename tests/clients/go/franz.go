package main

// franz-go (github.com/twmb/franz-go/pkg/kgo) with its defaults: idempotent producer,
// acks=all; classic consumer group protocol (no KIP-848 ServerSideBalancer).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func franzOpts(o options) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(o.brokers...), kgo.ClientID("jocko-e2e-franz")}
	if o.debug {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, func() string {
			return time.Now().Format("15:04:05.000000 [franz] ")
		})))
	}
	return opts
}

func franzCodec(codec string) (kgo.CompressionCodec, error) {
	switch codec {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown codec %q", codec)
}

func franzProduce(ctx context.Context, o options, recs []Record, out *printer) error {
	codec, err := franzCodec(o.codec)
	if err != nil {
		return err
	}
	opts := append(franzOpts(o),
		kgo.DefaultProduceTopic(o.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(codec),
		kgo.RequiredAcks(kgo.AllISRAcks()), // the default, stated
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	errs := make(chan error, len(recs))
	var acked atomic.Int64
	for i, chunk := range chunks(o, recs) {
		if i > 0 {
			if err := pace(ctx, o); err != nil {
				return err
			}
		}
		for _, r := range chunk {
			kr := &kgo.Record{
				Topic:     o.topic,
				Partition: r.Partition,
				Key:       r.Key,
				Value:     r.Value,
				Timestamp: time.UnixMilli(r.Timestamp),
			}
			for _, h := range r.Headers {
				kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			}
			cl.Produce(ctx, kr, func(r *kgo.Record, err error) {
				if err != nil {
					errs <- fmt.Errorf("p%d: %w", r.Partition, err)
				} else {
					acked.Add(1)
				}
			})
		}
		if o.every > 0 {
			out.acked(int(acked.Load()))
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	close(errs)
	n, first := 0, error(nil)
	for err := range errs {
		if first == nil {
			first = err
		}
		n++
	}
	if first != nil {
		return fmt.Errorf("%d of %d records failed, first: %w", n, len(recs), first)
	}
	return nil
}

func fromFranz(r *kgo.Record) Record {
	out := Record{
		Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(),
		Key: r.Key, Value: r.Value,
	}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, Header{Key: h.Key, Value: h.Value})
	}
	return out
}

// franzReportErrors prints fetch errors (franz-go retries the retriable ones itself).
func franzReportErrors(fs kgo.Fetches) {
	fs.EachError(func(t string, p int32, err error) {
		fmt.Fprintf(os.Stderr, "gokafka: franz fetch error %s[%d]: %v\n", t, p, err)
	})
}

func franzConsume(ctx, stop context.Context, o options, out *printer) error {
	parts := map[int32]kgo.Offset{}
	for p := 0; p < o.partitions; p++ {
		parts[int32(p)] = kgo.NewOffset().AtStart()
	}
	opts := append(franzOpts(o),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: parts}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for out.count() < o.n {
		fs := cl.PollFetches(stop)
		if ctx.Err() != nil {
			return errTimeout
		}
		if stop.Err() != nil {
			return fmt.Errorf("signalled after %d records", out.count())
		}
		franzReportErrors(fs)
		fs.EachRecord(func(r *kgo.Record) { out.record(fromFranz(r)) })
	}
	return nil
}

func franzGroup(ctx, stop context.Context, o options, out *printer) error {
	opts := append(franzOpts(o),
		kgo.ConsumerGroup(o.group),
		kgo.ConsumeTopics(o.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// Commit what a poll returned before the group may rebalance (franz-go's advice
		// for manual commits), so a revoked partition never has processed, uncommitted records.
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			out.assigned(m[o.topic])
		}),
	)
	if o.serverSide {
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for o.n <= 0 || out.count() < o.n {
		fs := cl.PollFetches(stop)
		if stop.Err() != nil {
			cl.AllowRebalance()
			break
		}
		franzReportErrors(fs)
		recs := fs.Records()
		next := map[int32]int64{}
		for _, r := range recs {
			out.record(fromFranz(r))
			if r.Offset+1 > next[r.Partition] {
				next[r.Partition] = r.Offset + 1
			}
		}
		if len(recs) > 0 {
			if err := franzCommit(ctx, cl, recs); err != nil {
				// as an at-least-once application does: the group moved on (a rebalance
				// after a coordinator change); these records are read again from the
				// last committed offsets by whoever owns their partitions next
				fmt.Fprintf(os.Stderr, "gokafka: franz commit failed, records will be "+
					"read again: %v\n", err)
			} else {
				out.committed(next)
			}
		}
		cl.AllowRebalance()
	}
	if ctx.Err() != nil {
		return errTimeout
	}
	// Every printed record was committed above. Leave the group explicitly, then report.
	cl.LeaveGroupContext(ctx)
	out.emit(map[string]any{"type": "done", "count": out.count()})
	return nil
}

// franzCommit commits recs, retrying (for up to 30 s) what a coordinator change can
// answer meanwhile; a generation or membership error is returned at once: the group is
// rebalancing and the records will be delivered again.
func franzCommit(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cl.CommitRecords(ctx, recs...)
		if err == nil {
			return nil
		}
		if errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.UnknownMemberID) ||
			errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.FencedInstanceID) ||
			ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		fmt.Fprintf(os.Stderr, "gokafka: franz commit failed, retrying: %v\n", err)
		time.Sleep(500 * time.Millisecond)
	}
}
