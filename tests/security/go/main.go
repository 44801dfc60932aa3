// gosec: a Go client over TLS and SASL against a secured listener: produce five records
// to partition 0 of -topic, read them back, print the values one per line. Exit status 1
// (and the error on stderr) on any failure. -lib franz, sarama or kafkago; each with
// PLAIN and SCRAM-SHA-256/512 (Sarama's SCRAM client is built on github.com/xdg-go/scram,
// as Sarama's own examples do; kafka-go ships one in sasl/scram).
//
// With -txnid (franz and sarama, the Go clients that do transactions): produce three
// records "<txnid>-<i>" in one transaction as that transactional id and commit it;
// prints COMMITTED, or FAILED: and the error (Sarama's Kafka errors also as
// "KERROR <code>") with exit status 1 (tests/security/test_txn_acls.py).
package main

import (
	"context"
	"errors"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	ksasl "github.com/segmentio/kafka-go/sasl"
	kplain "github.com/segmentio/kafka-go/sasl/plain"
	kscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"
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
	lib := flag.String("lib", "franz", "franz | sarama | kafkago")
	txnID := flag.String("txnid", "", "produce in one transaction as this transactional id")
	flag.Parse()
	tlsCfg := tlsConfig(*ca, *cert, *key)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *txnID != "" {
		switch *lib {
		case "franz":
			franzTxn(ctx, *brokers, *topic, *txnID, *user, *password)
		case "sarama":
			saramaTxn(*brokers, *topic, *txnID, *user, *password)
		default:
			fail(fmt.Errorf("-txnid: %q does not do transactions", *lib))
		}
		return
	}
	switch *lib {
	case "franz":
		franz(ctx, *brokers, *topic, tlsCfg, *mech, *user, *password)
	case "sarama":
		saramaRun(ctx, *brokers, *topic, tlsCfg, *mech, *user, *password)
	case "kafkago":
		kafkagoRun(ctx, *brokers, *topic, tlsCfg, *mech, *user, *password)
	default:
		fail(fmt.Errorf("unknown -lib %q", *lib))
	}
}

func tlsConfig(ca, cert, key string) *tls.Config {
	if ca == "" {
		return nil
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		fail(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			fail(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

func franz(ctx context.Context, brokers, topic string, tlsCfg *tls.Config, mech, user,
	password string) {

	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ClientID("jocko-gosec"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation(),
	}
	if tlsCfg != nil {
		opts = append(opts, kgo.Dialer((&tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second},
			Config: tlsCfg}).DialContext))
	}
	var m sasl.Mechanism
	switch mech {
	case "":
	case "PLAIN":
		m = plain.Auth{User: user, Pass: password}.AsMechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	default:
		fail(fmt.Errorf("unknown mechanism %q", mech))
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
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
		topic: {0: kgo.NewOffset().AtStart()}}))...)
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

func saramaRun(ctx context.Context, brokers, topic string, tlsCfg *tls.Config, mech, user,
	password string) {
	c := sarama.NewConfig()
	c.ClientID = "jocko-gosec-sarama"
	c.Producer.Return.Successes = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	if tlsCfg != nil {
		c.Net.TLS.Enable, c.Net.TLS.Config = true, tlsCfg
	}
	switch mech {
	case "":
	case "PLAIN":
		c.Net.SASL.Enable, c.Net.SASL.Mechanism = true, sarama.SASLTypePlaintext
		c.Net.SASL.User, c.Net.SASL.Password = user, password
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		c.Net.SASL.Enable, c.Net.SASL.Handshake = true, true
		c.Net.SASL.User, c.Net.SASL.Password = user, password
		if mech == "SCRAM-SHA-256" {
			c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
			c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient {
				return &saramaSCRAM{hash: xscram.SHA256}
			}
		} else {
			c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient {
				return &saramaSCRAM{hash: xscram.SHA512}
			}
		}
	default:
		fail(fmt.Errorf("sarama: mechanism %q not wired here", mech))
	}
	addrs := strings.Split(brokers, ",")
	p, err := sarama.NewSyncProducer(addrs, c)
	if err != nil {
		fail(err)
	}
	for i := 0; i < 5; i++ {
		msg := &sarama.ProducerMessage{Topic: topic, Partition: 0,
			Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))}
		if _, _, err := p.SendMessage(msg); err != nil {
			fail(err)
		}
	}
	p.Close()
	consumer, err := sarama.NewConsumer(addrs, c)
	if err != nil {
		fail(err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		fail(err)
	}
	defer pc.Close()
	var got []string
	for len(got) < 5 {
		select {
		case m := <-pc.Messages():
			got = append(got, string(m.Value))
		case err := <-pc.Errors():
			fail(err)
		case <-ctx.Done():
			fail(fmt.Errorf("read %d of 5 records: %w", len(got), ctx.Err()))
		}
	}
	fmt.Println(strings.Join(got, "\n"))
}

func kafkagoRun(ctx context.Context, brokers, topic string, tlsCfg *tls.Config, mech, user,
	password string) {
	var mechanism ksasl.Mechanism
	switch mech {
	case "":
	case "PLAIN":
		mechanism = kplain.Mechanism{Username: user, Password: password}
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		algo := kscram.SHA256
		if mech == "SCRAM-SHA-512" {
			algo = kscram.SHA512
		}
		m, err := kscram.Mechanism(algo, user, password)
		if err != nil {
			fail(err)
		}
		mechanism = m
	default:
		fail(fmt.Errorf("kafka-go: mechanism %q not wired here", mech))
	}
	addrs := strings.Split(brokers, ",")
	w := &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: 10 * time.Millisecond,
		AllowAutoTopicCreation: true,
		Transport:              &kafka.Transport{TLS: tlsCfg, SASL: mechanism}}
	var msgs []kafka.Message
	for i := 0; i < 5; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte("k"), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	var err error
	for attempt := 0; attempt < 20; attempt++ { // the first write may race topic creation
		if err = w.WriteMessages(ctx, msgs...); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		fail(err)
	}
	w.Close()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: topic, Partition: 0,
		MaxWait: 500 * time.Millisecond,
		Dialer:  &kafka.Dialer{Timeout: 10 * time.Second, TLS: tlsCfg, SASLMechanism: mechanism}})
	defer r.Close()
	var got []string
	for len(got) < 5 {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			fail(fmt.Errorf("read %d of 5 records: %w", len(got), err))
		}
		got = append(got, string(m.Value))
	}
	fmt.Println(strings.Join(got, "\n"))
}

// saramaSCRAM is sarama.SCRAMClient over an xdg-go/scram conversation.
type saramaSCRAM struct {
	hash xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (s *saramaSCRAM) Begin(user, password, authzID string) error {
	client, err := s.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = client.NewConversation()
	return nil
}

func (s *saramaSCRAM) Step(challenge string) (string, error) {
	return s.conv.Step(challenge)
}

func (s *saramaSCRAM) Done() bool {
	return s.conv.Done()
}

// franzTxn: one committed transaction of three records (SASL/PLAIN, no TLS).
func franzTxn(ctx context.Context, brokers, topic, txnID, user, password string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.ClientID("jocko-gosec-txn"), kgo.TransactionalID(txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic),
		kgo.SASL(plain.Auth{User: user, Pass: password}.AsMechanism()),
		kgo.RequestRetries(2), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		fail(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		fail(err)
	}
	for i := 0; i < 3; i++ {
		r := &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", txnID, i)), Partition: 0}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			fail(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		fail(err)
	}
	fmt.Println("COMMITTED")
}

// saramaTxn: the same with Sarama's transactional producer.
func saramaTxn(brokers, topic, txnID, user, password string) {
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	c.ClientID = "jocko-gosec-sarama-txn"
	c.Producer.Return.Successes = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Transaction.ID = txnID
	c.Producer.Retry.Max = 3
	c.Net.MaxOpenRequests = 1
	c.Net.SASL.Enable, c.Net.SASL.Mechanism = true, sarama.SASLTypePlaintext
	c.Net.SASL.User, c.Net.SASL.Password = user, password
	p, err := sarama.NewSyncProducer(strings.Split(brokers, ","), c)
	if err != nil {
		saramaFail(err)
	}
	defer p.Close()
	if err := p.BeginTxn(); err != nil {
		saramaFail(err)
	}
	for i := 0; i < 3; i++ {
		msg := &sarama.ProducerMessage{Topic: topic, Partition: 0,
			Value: sarama.StringEncoder(fmt.Sprintf("%s-%d", txnID, i))}
		if _, _, err := p.SendMessage(msg); err != nil {
			saramaFail(err)
		}
	}
	if err := p.CommitTxn(); err != nil {
		saramaFail(err)
	}
	fmt.Println("COMMITTED")
}

func saramaFail(err error) {
	var kerr sarama.KError
	if errors.As(err, &kerr) {
		fmt.Fprintf(os.Stderr, "KERROR %d\n", int16(kerr))
	}
	fail(err)
}
