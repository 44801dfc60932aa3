// gotxn: franz-go's GroupTransactSession against jocko-py (tests/transactions/test_go_transactions.py).
//
// Consume-transform-produce: a read_committed group consumer on -in and a transactional
// producer writing "out-" + value to the same partition of -out, the group's offsets
// committed in each transaction (GroupTransactSession.End). Every third transaction
// is aborted on purpose (the session rewinds to the committed offsets, so those
// records are copied again). Stops once -n records were copied in committed
// transactions and prints "COMMITTED n ABORTED m". Bounded by -timeout (exit 3).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "", "bootstrap servers")
	in := flag.String("in", "", "input topic")
	out := flag.String("out", "", "output topic")
	group := flag.String("group", "", "consumer group")
	txnID := flag.String("txnid", "", "transactional id")
	n := flag.Int("n", 0, "records to copy")
	timeout := flag.Duration("timeout", 90*time.Second, "give up after")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.TransactionalID(*txnID),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "session:", err)
		os.Exit(1)
	}
	defer sess.Close()
	committed, aborted, txns := 0, 0, 0
	for committed < *n {
		if ctx.Err() != nil {
			fmt.Printf("COMMITTED %d ABORTED %d\n", committed, aborted)
			fmt.Fprintln(os.Stderr, "timed out")
			os.Exit(3)
		}
		fetches := sess.PollRecords(ctx, 40)
		fetches.EachError(func(t string, p int32, err error) {
			fmt.Fprintln(os.Stderr, "fetch error:", t, p, err)
		})
		recs := fetches.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			fmt.Fprintln(os.Stderr, "begin:", err)
			os.Exit(1)
		}
		for _, r := range recs {
			sess.Produce(ctx, &kgo.Record{Topic: *out, Partition: r.Partition, Key: r.Key,
				Value: append([]byte("out-"), r.Value...)}, func(_ *kgo.Record, err error) {
				if err != nil {
					fmt.Fprintln(os.Stderr, "produce:", err)
				}
			})
		}
		txns++
		abort := txns%3 == 0
		ok, err := sess.End(ctx, kgo.TransactionEndTry(!abort))
		if err != nil {
			fmt.Fprintln(os.Stderr, "end:", err)
			os.Exit(1)
		}
		if ok {
			committed += len(recs)
		} else {
			aborted += len(recs)
		}
	}
	fmt.Printf("COMMITTED %d ABORTED %d\n", committed, aborted)
}
