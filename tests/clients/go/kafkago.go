package main

// kafka-go (github.com/segmentio/kafka-go): Writer with RequiredAcks=RequireAll (kafka-go has
// no idempotent producer), a Reader per partition (no GroupID) for assigned consumption, and a
// group Reader with explicit CommitMessages.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

func kafkagoLoggers(o options) (kafka.Logger, kafka.Logger) {
	errLog := kafka.LoggerFunc(log.New(os.Stderr, "[kafka-go error] ", log.Ltime|log.Lmicroseconds).Printf)
	if !o.debug {
		return nil, errLog
	}
	return kafka.LoggerFunc(log.New(os.Stderr, "[kafka-go] ", log.Ltime|log.Lmicroseconds).Printf), errLog
}

func kafkagoCodec(codec string) (kafka.Compression, error) {
	switch codec {
	case "none":
		return 0, nil
	case "gzip":
		return kafka.Gzip, nil
	case "snappy":
		return kafka.Snappy, nil
	case "lz4":
		return kafka.Lz4, nil
	case "zstd":
		return kafka.Zstd, nil
	}
	return 0, fmt.Errorf("unknown codec %q", codec)
}

// fixedPartition is the Balancer of a Writer that writes to one partition only: the Writer
// ignores Message.Partition, and a Balancer sees nothing that could say where a record
// with a null key belongs, so the records of each partition get their own Writer.
type fixedPartition int

func (p fixedPartition) Balance(kafka.Message, ...int) int { return int(p) }

func kafkagoProduce(ctx context.Context, o options, recs []Record, out *printer) error {
	codec, err := kafkagoCodec(o.codec)
	if err != nil {
		return err
	}
	logger, errLogger := kafkagoLoggers(o)
	byPartition := map[int32][]kafka.Message{}
	for _, r := range recs {
		m := kafka.Message{Key: r.Key, Value: r.Value, Time: time.UnixMilli(r.Timestamp)}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
		byPartition[r.Partition] = append(byPartition[r.Partition], m)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	var acked atomic.Int64
	for p, msgs := range byPartition {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &kafka.Writer{
				Addr:         kafka.TCP(o.brokers...),
				Topic:        o.topic,
				Balancer:     fixedPartition(p),
				RequiredAcks: kafka.RequireAll,
				Compression:  codec,
				BatchTimeout: 10 * time.Millisecond, // the default 1s only delays the last batch
				Logger:       logger,
				ErrorLogger:  errLogger,
			}
			if o.every > 0 {
				// A paced stream rides out a partition leader failover (seconds).
				w.MaxAttempts = 60
				w.WriteBackoffMax = 500 * time.Millisecond
			}
			var err error
			for i, chunk := range chunks(o, msgs) {
				if i > 0 {
					if err = pace(ctx, o); err != nil {
						break
					}
				}
				if err = w.WriteMessages(ctx, chunk...); err != nil {
					break
				}
				if o.every > 0 {
					out.acked(int(acked.Add(int64(len(chunk)))))
				}
			}
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			var werrs kafka.WriteErrors
			if errors.As(err, &werrs) {
				n, first := 0, error(nil)
				for _, e := range werrs {
					if e != nil {
						if first == nil {
							first = e
						}
						n++
					}
				}
				err = fmt.Errorf("%d of %d records failed, first: %w", n, len(msgs), first)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("partition %d: %w", p, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func fromKafkago(m kafka.Message) Record {
	r := Record{
		Partition: int32(m.Partition), Offset: m.Offset, Timestamp: m.Time.UnixMilli(),
		Key: m.Key, Value: m.Value,
	}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, Header{Key: h.Key, Value: h.Value})
	}
	return r
}

func kafkagoConsume(ctx, stop context.Context, o options, out *printer) error {
	logger, errLogger := kafkagoLoggers(o)
	run, finish := context.WithCancel(stop)
	defer finish()
	errs := make(chan error, o.partitions)
	var wg sync.WaitGroup
	for p := 0; p < o.partitions; p++ {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:     o.brokers,
			Topic:       o.topic,
			Partition:   p,
			MinBytes:    1,
			MaxBytes:    10 << 20,
			MaxWait:     500 * time.Millisecond,
			Logger:      logger,
			ErrorLogger: errLogger,
		})
		if err := r.SetOffset(kafka.FirstOffset); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			for {
				m, err := r.ReadMessage(run)
				if err != nil {
					if run.Err() == nil {
						errs <- fmt.Errorf("partition %d: %w", p, err)
						finish()
					}
					return
				}
				if out.record(fromKafkago(m)) >= o.n {
					finish()
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	if out.count() >= o.n {
		return nil
	}
	if ctx.Err() != nil {
		return errTimeout
	}
	return fmt.Errorf("signalled after %d records", out.count())
}

func kafkagoGroup(ctx, stop context.Context, o options, out *printer) error {
	logger, errLogger := kafkagoLoggers(o)
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:     o.brokers,
		GroupID:     o.group,
		Topic:       o.topic,
		StartOffset: kafka.FirstOffset,
		MinBytes:    1,
		MaxBytes:    10 << 20,
		MaxWait:     500 * time.Millisecond,
		// CommitInterval 0: CommitMessages commits synchronously.
		Logger:      logger,
		ErrorLogger: errLogger,
	})
	defer r.Close()
	var pending []kafka.Message
	// commit commits what was processed. A failure (the coordinator's broker died: the
	// generation's connection is gone until the reader rejoins) is reported and the
	// records stay pending for the next commit, as an application would retry.
	commit := func() error {
		if len(pending) == 0 {
			return nil
		}
		if err := r.CommitMessages(ctx, pending...); err != nil {
			fmt.Fprintf(os.Stderr, "gokafka: kafka-go commit failed (retried later): %v\n", err)
			return fmt.Errorf("commit: %w", err)
		}
		next := map[int32]int64{}
		for _, m := range pending {
			if m.Offset+1 > next[int32(m.Partition)] {
				next[int32(m.Partition)] = m.Offset + 1
			}
		}
		out.committed(next)
		pending = pending[:0]
		return nil
	}
	for o.n <= 0 || out.count() < o.n {
		// Wait briefly for the next record; when none comes, commit what was processed.
		fctx, cancel := context.WithTimeout(stop, 200*time.Millisecond)
		m, err := r.FetchMessage(fctx)
		cancel()
		if err != nil {
			if stop.Err() != nil {
				break
			}
			if errors.Is(err, context.DeadlineExceeded) {
				_ = commit()
				continue
			}
			if errors.Is(err, io.EOF) { // the reader was closed
				return err
			}
			// The group reader heals itself: when it cannot reach the coordinator
			// MaxAttempts times in a row (a coordinator's broker died) it hands that
			// error to FetchMessage and keeps trying; an application keeps fetching.
			fmt.Fprintf(os.Stderr, "gokafka: kafka-go fetch error (fetching again): %v\n", err)
			continue
		}
		out.record(fromKafkago(m))
		pending = append(pending, m)
		if len(pending) >= 200 {
			_ = commit()
		}
	}
	if ctx.Err() != nil {
		return errTimeout
	}
	for commit() != nil { // the last commit must land (bounded by -timeout)
		select {
		case <-ctx.Done():
			return errTimeout
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := r.Close(); err != nil { // leaves the group
		return err
	}
	out.emit(map[string]any{"type": "done", "count": out.count()})
	return nil
}
