// Package e2e runs moraine's real binaries against the real local stack
// (ClickHouse and Kafka from deploy/stack) and real chain data, and checks
// what comes out against the golden warehouse tables in ../shared/data.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// TestMain removes the binaries the tests built: about 200 MB per run,
// which piled up in the temporary directory when each run left its own.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// repoRoot is the directory holding go.work.
func repoRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("cannot locate go.work: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// binaries builds the services and chain sources once per test run.
func binaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root := repoRoot(t)
		binDir, buildErr = os.MkdirTemp("", "moraine-e2e-bin-")
		if buildErr != nil {
			return
		}
		for _, p := range []string{"./ingest/cmd/ingest", "./processor/cmd/processor", "./query/cmd/query", "./query/cmd/moraine-admin", "./query/cmd/querybench", "./delivery/cmd/delivery", "./deploy/cmd/replay", "./deploy/cmd/devchain", "./deploy/cmd/corpus"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, filepath.Base(p)), p)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", p, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// proc is a running binary whose log is kept in a file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan error
}

// start runs bin with args; the process is stopped (SIGTERM, then SIGKILL)
// at cleanup, and its log tail is printed when the test failed. With
// MORAINE_E2E_LOG_DIR set, the whole log is kept there, one file per
// process (<name>-<start time in ns>.log).
func start(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	return startTo(t, "", name, args...)
}

// startTo is start with the process's standard output written to
// stdoutPath (its log, standard error, stays where start puts it), or with
// both in the log when stdoutPath is empty.
func startTo(t testing.TB, stdoutPath, name string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	if d := os.Getenv("MORAINE_E2E_LOG_DIR"); d != "" {
		logPath = filepath.Join(d, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
	}
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binaries(t), name), args...)
	cmd.Stdout, cmd.Stderr = f, f
	if stdoutPath != "" {
		out, err := os.Create(stdoutPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { out.Close() })
		cmd.Stdout = out
	}
	// A clean environment for MORAINE_* so the developer's shell does not
	// leak settings into the test; the flags say everything.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MORAINE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Each process in a session of its own, as each service runs as a unit
	// of its own in production: the kernel shares the cores between
	// sessions (autogroups) as it shares them between services' cgroups,
	// where one session would make every service, the load generator and
	// the test one group against ClickHouse and Kafka.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	t.Cleanup(func() {
		p.stop(15 * time.Second)
		if t.Failed() || os.Getenv("MORAINE_E2E_SHOW_LOGS") != "" {
			t.Logf("--- last lines of %s log:\n%s", name, tail(logPath, 40))
		}
	})
	return p
}

// runTool runs a built binary to its end and returns its standard output,
// failing the test when it fails.
func runTool(t testing.TB, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), name), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// testLogger is a logger for clients the tests make themselves: warnings
// and errors to standard error.
func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// stop sends SIGTERM and waits, then kills.
func (p *proc) stop(grace time.Duration) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill stops the process with SIGKILL: a crash.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitReady polls url until it answers 200, or fails the test.
func waitReady(t testing.TB, p *proc, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited before ready: %v\n%s", p.name, err, tail(p.log, 40))
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s not ready at %s after %s (last: %s)\n%s", p.name, url, timeout, last, tail(p.log, 40))
}

// eventually polls cond until it holds, or fails the test naming what.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	eventuallyShowing(t, timeout, what, cond, nil)
}

// eventuallyShowing is eventually whose failure also says state() (what
// cond last saw, when not nil), so that a slow wait tells from a stuck one.
func eventuallyShowing(t testing.TB, timeout time.Duration, what string, cond func() bool, state func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			if state != nil {
				t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, state())
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
