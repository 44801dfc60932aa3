package main

// Sarama (github.com/IBM/sarama) with its default protocol version (sarama.DefaultVersion),
// an idempotent producer (Producer.Idempotent, acks=WaitForAll, Net.MaxOpenRequests=1, as
// Sarama requires), the plain partition consumer and the consumer-group API with manual commits.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

func saramaConfig(o options) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = "jocko-e2e-sarama"
	if o.debug {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Ltime|log.Lmicroseconds)
	}
	return c
}

func saramaCodec(codec string) (sarama.CompressionCodec, error) {
	switch codec {
	case "none":
		return sarama.CompressionNone, nil
	case "gzip":
		return sarama.CompressionGZIP, nil
	case "snappy":
		return sarama.CompressionSnappy, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return sarama.CompressionNone, fmt.Errorf("unknown codec %q", codec)
}

// bounded runs f and gives up when ctx ends (Sarama's calls take no context; the process
// exits right after a timeout, taking the goroutine with it).
func bounded(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return errTimeout
	}
}

func saramaProduce(ctx context.Context, o options, recs []Record, out *printer) error {
	c := saramaConfig(o)
	codec, err := saramaCodec(o.codec)
	if err != nil {
		return err
	}
	c.Producer.Compression = codec
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Flush.Frequency = 5 * time.Millisecond
	if o.every > 0 {
		// A paced stream rides out a partition leader failover (seconds), not 3 x 100 ms.
		c.Producer.Retry.Max = 60
		c.Producer.Retry.Backoff = 250 * time.Millisecond
		c.Metadata.Retry.Max = 60
		c.Metadata.Retry.Backoff = 250 * time.Millisecond
	}
	msgs := make([]*sarama.ProducerMessage, 0, len(recs))
	for _, r := range recs {
		m := &sarama.ProducerMessage{
			Topic:     o.topic,
			Partition: r.Partition,
			Timestamp: time.UnixMilli(r.Timestamp),
		}
		if r.Key != nil {
			m.Key = sarama.ByteEncoder(r.Key)
		}
		if r.Value != nil {
			m.Value = sarama.ByteEncoder(r.Value)
		}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		msgs = append(msgs, m)
	}
	return bounded(ctx, func() error {
		p, err := sarama.NewSyncProducer(o.brokers, c)
		if err != nil {
			return err
		}
		defer p.Close()
		acked := 0
		for i, chunk := range chunks(o, msgs) {
			if i > 0 {
				if err := pace(ctx, o); err != nil {
					return err
				}
			}
			if err := p.SendMessages(chunk); err != nil {
				var perrs sarama.ProducerErrors
				if errors.As(err, &perrs) && len(perrs) > 0 {
					return fmt.Errorf("%d of %d records failed (%d acknowledged before), first: p%d: %w",
						len(perrs), len(msgs), acked, perrs[0].Msg.Partition, perrs[0].Err)
				}
				return err
			}
			acked += len(chunk)
			if o.every > 0 {
				out.acked(acked)
			}
		}
		return nil
	})
}

func fromSarama(m *sarama.ConsumerMessage) Record {
	r := Record{
		Partition: m.Partition, Offset: m.Offset, Timestamp: m.Timestamp.UnixMilli(),
		Key: m.Key, Value: m.Value,
	}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, Header{Key: string(h.Key), Value: h.Value})
	}
	return r
}

func saramaConsume(ctx, stop context.Context, o options, out *printer) error {
	c := saramaConfig(o)
	c.Consumer.Return.Errors = true
	c.Consumer.MaxWaitTime = 500 * time.Millisecond
	var consumer sarama.Consumer
	err := bounded(ctx, func() (err error) {
		consumer, err = sarama.NewConsumer(o.brokers, c)
		return err
	})
	if err != nil {
		return err
	}
	enough := make(chan struct{})
	var once sync.Once
	var pcs []sarama.PartitionConsumer
	for p := 0; p < o.partitions; p++ {
		pc, err := consumer.ConsumePartition(o.topic, int32(p), sarama.OffsetOldest)
		if err != nil {
			return fmt.Errorf("ConsumePartition(%d): %w", p, err)
		}
		pcs = append(pcs, pc)
		go func() {
			for m := range pc.Messages() {
				if out.record(fromSarama(m)) >= o.n {
					once.Do(func() { close(enough) })
				}
			}
		}()
		go func() {
			for err := range pc.Errors() {
				fmt.Fprintf(os.Stderr, "gokafka: sarama consume error: %v\n", err)
			}
		}()
	}
	select {
	case <-enough:
	case <-stop.Done():
		if ctx.Err() != nil {
			return errTimeout
		}
		return fmt.Errorf("signalled after %d records", out.count())
	}
	return bounded(ctx, func() error {
		for _, pc := range pcs {
			pc.AsyncClose()
		}
		return consumer.Close()
	})
}

type saramaHandler struct {
	o      options
	out    *printer
	finish context.CancelFunc // the member has read -n records
	mu     sync.Mutex         // one Commit at a time; guards marked
	marked map[int32]int64
}

func (h *saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.out.assigned(s.Claims()[h.o.topic])
	return nil
}

func (h *saramaHandler) commit(s sarama.ConsumerGroupSession) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.Commit() // synchronous (AutoCommit disabled); failures go to the group's Errors()
	if len(h.marked) > 0 {
		h.out.committed(h.marked)
		h.marked = map[int32]int64{}
	}
}

func (h *saramaHandler) Cleanup(s sarama.ConsumerGroupSession) error {
	h.commit(s)
	return nil
}

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			n := h.out.record(fromSarama(m))
			s.MarkMessage(m, "")
			h.mu.Lock()
			h.marked[m.Partition] = m.Offset + 1
			h.mu.Unlock()
			if len(claim.Messages()) == 0 { // caught up for now: commit what was processed
				h.commit(s)
			}
			if h.o.n > 0 && n >= h.o.n {
				h.finish()
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func saramaGroup(ctx, stop context.Context, o options, out *printer) error {
	c := saramaConfig(o)
	c.Consumer.Return.Errors = true
	c.Consumer.MaxWaitTime = 500 * time.Millisecond
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	var cg sarama.ConsumerGroup
	err := bounded(ctx, func() (err error) {
		cg, err = sarama.NewConsumerGroup(o.brokers, o.group, c)
		return err
	})
	if err != nil {
		return err
	}
	var commitErrs []error
	var errMu sync.Mutex
	go func() {
		for err := range cg.Errors() {
			fmt.Fprintf(os.Stderr, "gokafka: sarama group error: %v\n", err)
			errMu.Lock()
			commitErrs = append(commitErrs, err)
			errMu.Unlock()
		}
	}()
	run, finish := context.WithCancel(stop)
	defer finish()
	h := &saramaHandler{o: o, out: out, finish: finish, marked: map[int32]int64{}}
	for run.Err() == nil {
		// Consume returns at every rebalance; call it again, as Sarama's example does.
		if err := cg.Consume(run, []string{o.topic}, h); err != nil {
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				break
			}
			// E.g. the JoinGroup to a coordinator whose broker just died (Sarama returns
			// the dial error instead of looking the coordinator up again): an
			// application calls Consume again, which finds the new coordinator.
			fmt.Fprintf(os.Stderr, "gokafka: sarama Consume: %v (calling it again)\n", err)
			select {
			case <-run.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	if ctx.Err() != nil {
		return errTimeout
	}
	if err := bounded(ctx, cg.Close); err != nil { // leaves the group
		return err
	}
	// Group errors (printed above) may be transient, e.g. a commit refused during a
	// rebalance and repeated later; the test checks the offsets the broker holds.
	errMu.Lock()
	defer errMu.Unlock()
	out.emit(map[string]any{"type": "done", "count": out.count(), "errors": len(commitErrs)})
	return nil
}
