// Package testenv gives tests the real local services that `make test`
// starts (deploy/stack/stack.sh): a Kafka broker and a ClickHouse server.
//
// A missing service is a test failure with a clear message, never a skip:
// integration coverage must not vanish silently. Each helper isolates the
// test: Kafka topics get a unique prefix and ClickHouse a fresh database,
// dropped at cleanup.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/schemas/topics"
)

const hint = "start the local stack first: `make test` does it, or run `deploy/stack/stack.sh start` and `eval $(deploy/stack/stack.sh env)`"

// need returns the value of an environment variable naming a service
// address, failing the test when it is unset or nothing listens there.
func need(t testing.TB, env string) string {
	t.Helper()
	addr := os.Getenv(env)
	if addr == "" {
		t.Fatalf("%s is not set: this test needs the real service; %s", env, hint)
	}
	first := strings.Split(addr, ",")[0]
	c, err := net.DialTimeout("tcp", first, 3*time.Second)
	if err != nil {
		t.Fatalf("%s=%s: nothing answers (%v); %s", env, addr, err, hint)
	}
	c.Close()
	return addr
}

// Suffix returns a short random name part for isolating a test's resources.
func Suffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Kafka returns a Kafka config for the real broker with a unique topic
// prefix; the topics are created.
func Kafka(t testing.TB) kafkautil.Config {
	t.Helper()
	cfg := kafkautil.Config{Brokers: need(t, "MORAINE_KAFKA_BROKERS"), TopicPrefix: "test-" + Suffix() + "."}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kafkautil.NewClient(ctx, Logger(t), cfg.BaseOpts(Logger(t), "testenv")...)
	if err != nil {
		t.Fatalf("kafka: %v", err)
	}
	defer cl.Close()
	if err := cfg.EnsureTopics(ctx, cl, Logger(t)); err != nil {
		t.Fatalf("kafka: create topics: %v", err)
	}
	// Delete the test's topics afterwards: a broker that keeps thousands of
	// test partitions spends its CPU on them and slows every later test.
	t.Cleanup(func() {
		if os.Getenv("MORAINE_TEST_KEEP_TOPICS") != "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(cfg.BaseOpts(Logger(t), "testenv-cleanup")...)
		if err != nil {
			return
		}
		defer cl.Close()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, topics.Names(cfg.Topics())...)
	})
	return cfg
}

// ClickHouse returns a config for a fresh database on the real server, with
// the migrations applied, and an open connection to it. The database is
// dropped when the test ends unless MORAINE_TEST_KEEP_DB is set.
func ClickHouse(t testing.TB) (chclient.Config, driver.Conn) {
	t.Helper()
	cfg := ClickHouseConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := chclient.Open(ctx, cfg, Logger(t))
	if err != nil {
		t.Fatalf("clickhouse: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return cfg, conn
}

// ClickHouseConfig returns a config naming a database that does not exist
// yet on the real server (or cluster: MORAINE_CLICKHOUSE_CLUSTER names it,
// and MORAINE_CLICKHOUSE_ADDR lists its replicas). The database is dropped
// when the test ends unless MORAINE_TEST_KEEP_DB is set.
func ClickHouseConfig(t testing.TB) chclient.Config {
	t.Helper()
	cfg := chclient.Config{
		Addr:        need(t, "MORAINE_CLICKHOUSE_ADDR"),
		Database:    "test_" + Suffix(),
		User:        "default",
		ReadTimeout: 60 * time.Second,
		Cluster:     os.Getenv("MORAINE_CLICKHOUSE_CLUSTER"),
		DDLTimeout:  30 * time.Second,
	}
	t.Cleanup(func() {
		if os.Getenv("MORAINE_TEST_KEEP_DB") != "" {
			t.Logf("kept database %s", cfg.Database)
			return
		}
		admin, err := clickhouse.Open(&clickhouse.Options{Addr: cfg.Addrs()})
		if err != nil {
			return
		}
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		drop := "DROP DATABASE IF EXISTS " + cfg.Database
		if cfg.Cluster != "" {
			drop += " ON CLUSTER " + cfg.Cluster
		}
		_ = admin.Exec(ctx, drop)
	})
	return cfg
}

// Logger returns a logger that writes through t.Log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// SharedData returns the path of a file under ../shared/data, found by
// walking up from the working directory; the test fails when it is absent.
func SharedData(t testing.TB, rel string) string {
	t.Helper()
	dir, _ := os.Getwd()
	for i := 0; i < 6; i++ {
		p := fmt.Sprintf("%s/shared/data/%s", dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		p = fmt.Sprintf("%s/../shared/data/%s", dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		dir += "/.."
	}
	if p := os.Getenv("MORAINE_SHARED_DATA"); p != "" {
		return p + "/" + rel
	}
	t.Fatalf("shared data %s not found: clone moraine beside ../shared or set MORAINE_SHARED_DATA", rel)
	return ""
}
