// Command clustercheck checks the local cluster that `make cluster` (or
// `deploy/stack/stack.sh cluster start`) runs: every node up and configured,
// a ClickHouse replica and a Kafka broker each SIGKILLed and restarted with
// nothing acknowledged lost. It prints the recovery times it measures and
// exits 1 on the first failure. See package clustercheck.
//
// It acts on the cluster of the environment's MORAINE_STATE_DIR and
// MORAINE_CLUSTER_PORT_BASE, as stack.sh does; `make cluster-check` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/moraine-data/moraine/deploy/clustercheck"
)

func main() {
	limits := clustercheck.DefaultLimits()
	o := clustercheck.Options{Out: os.Stdout}
	fs := flag.NewFlagSet("clustercheck", flag.ExitOnError)
	fs.StringVar(&o.Stack.Script, "stack", "deploy/stack/stack.sh", "path of stack.sh")
	fs.BoolVar(&o.SkipClickHouse, "skip-clickhouse", false, "leave out the ClickHouse checks")
	fs.BoolVar(&o.SkipKafka, "skip-kafka", false, "leave out the Kafka checks")
	fs.DurationVar(&limits.ReplicaWritable, "limit.replica-writable", limits.ReplicaWritable, "a restarted ClickHouse replica must accept an INSERT within this")
	fs.DurationVar(&limits.ReplicaCaughtUp, "limit.replica-caught-up", limits.ReplicaCaughtUp, "a restarted ClickHouse replica must hold every row, replication active, within this")
	fs.DurationVar(&limits.Replicated, "limit.replicated", limits.Replicated, "rows written on one replica must be read on the other within this")
	fs.DurationVar(&limits.AckWait, "limit.ack-wait", limits.AckWait, "no acks=all send may wait longer than this for its ack while a broker dies")
	fs.DurationVar(&limits.BrokerInSync, "limit.broker-in-sync", limits.BrokerInSync, "a restarted broker must be back in the in-sync replicas within this")
	timeout := fs.Duration("timeout", 10*time.Minute, "the whole check's deadline")
	_ = fs.Parse(os.Args[1:])
	o.Limits = limits

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	t0 := time.Now()
	if err := clustercheck.Run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL after %.0f s: %v\n", time.Since(t0).Seconds(), err)
		os.Exit(1)
	}
	fmt.Printf("PASS (%.0f s)\n", time.Since(t0).Seconds())
}
