// gosec: franz-go over TLS and SASL (PLAIN, SCRAM-SHA-256/512) against a secured
// listener: produce five records to partition 0 of -topic, read them back, print the
// values one per line. Exit status 1 (and the error on stderr) on any failure.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, "FAILED:", err)
	os.Exit(1)
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma separated")
	topic := flag.String("topic", "", "topic")
	ca := flag.String("ca", "", "PEM CA file: use TLS")
	cert := flag.String("cert", "", "PEM client certificate (mTLS)")
	key := flag.String("key", "", "PEM client key (mTLS)")
	mech := flag.String("mechanism", "", "PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512")
	user := flag.String("user", "", "SASL user")
	password := flag.String("password", "", "SASL password")
	timeout := flag.Duration("timeout", 30*time.Second, "upper bound on the whole run")
	flag.Parse()

	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.ClientID("jocko-gosec"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(*topic),
		kgo.AllowAutoTopicCreation(),
	}
	if *ca != "" {
		pem, err := os.ReadFile(*ca)
		if err != nil {
			fail(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if *cert != "" {
			pair, err := tls.LoadX509KeyPair(*cert, *key)
			if err != nil {
				fail(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, kgo.Dialer((&tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second},
			Config: cfg}).DialContext))
	}
	var m sasl.Mechanism
	switch *mech {
	case "":
	case "PLAIN":
		m = plain.Auth{User: *user, Pass: *password}.AsMechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: *user, Pass: *password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: *user, Pass: *password}.AsSha512Mechanism()
	default:
		fail(fmt.Errorf("unknown mechanism %q", *mech))
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fail(err)
	}
	for i := 0; i < 5; i++ {
		r := &kgo.Record{Value: []byte(fmt.Sprintf("v%d", i)), Partition: 0}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			fail(err)
		}
	}
	cl.Close()
	cl, err = kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		*topic: {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		fail(err)
	}
	defer cl.Close()
	var got []string
	for len(got) < 5 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			fail(fmt.Errorf("read %d of 5 records: %w", len(got), err))
		}
		fs.EachError(func(t string, p int32, err error) { fail(err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	fmt.Println(strings.Join(got, "\n"))
}
