package clustercheck

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Stack runs deploy/stack/stack.sh's cluster commands. The script inherits
// the environment (MORAINE_STATE_DIR, MORAINE_CLUSTER_PORT_BASE), so the
// check acts on the same cluster as the caller's.
type Stack struct {
	// Script is the path of stack.sh.
	Script string
}

func (s Stack) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{s.Script, "cluster"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	text := strings.TrimSpace(out.String())
	if err != nil {
		return text, fmt.Errorf("stack.sh cluster %s: %w\n%s", strings.Join(args, " "), err, text)
	}
	return text, nil
}

// Env returns the variables `stack.sh cluster env` exports.
func (s Stack) Env(ctx context.Context) (map[string]string, error) {
	out, err := s.run(ctx, "env")
	if err != nil {
		return nil, err
	}
	return parseExports(out)
}

// parseExports reads `export NAME=VALUE` lines. Values are taken as printed:
// the ones the check uses (addresses, the cluster name) never need quoting.
func parseExports(text string) (map[string]string, error) {
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		rest, ok := strings.CutPrefix(line, "export ")
		if !ok {
			return nil, fmt.Errorf("unexpected line in stack.sh cluster env: %q", line)
		}
		name, value, ok := strings.Cut(rest, "=")
		if !ok {
			return nil, fmt.Errorf("unexpected line in stack.sh cluster env: %q", line)
		}
		env[name] = value
	}
	return env, nil
}

// Status returns `stack.sh cluster status`'s report; an error if a node is
// not running and answering.
func (s Stack) Status(ctx context.Context) (string, error) { return s.run(ctx, "status") }

// Kill SIGKILLs a node (and waits until it is gone).
func (s Stack) Kill(ctx context.Context, node string) error {
	_, err := s.run(ctx, "kill", node)
	return err
}

// Start starts a node and waits until it answers; it returns how long that took.
func (s Stack) Start(ctx context.Context, node string) (time.Duration, error) {
	t0 := time.Now()
	_, err := s.run(ctx, "start", node)
	return time.Since(t0), err
}
