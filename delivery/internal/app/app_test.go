package app

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestReadyAndGracefulStop starts the service on the real stack, waits for
// /readyz to answer 200 and checks that cancelling stops it cleanly.
func TestReadyAndGracefulStop(t *testing.T) {
	kcfg := testenv.Kafka(t)
	ccfg, _ := testenv.ClickHouse(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := Config{Kafka: kcfg, ClickHouse: ccfg, ChainsFile: "../../../deploy/chains/dev.json", ShutdownTimeout: 5 * time.Second}
	cfg.Admin.ListenAddress = addr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, testenv.Logger(t), prometheus.NewRegistry()) }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready in 30 s (last: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("did not stop within 15 s")
	}
}
