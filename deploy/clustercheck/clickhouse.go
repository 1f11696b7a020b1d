package clustercheck

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// chServer is one ClickHouse server of the cluster: clickhouse-N is the
// N-th address of `stack.sh cluster env`.
type chServer struct {
	node string
	addr string
	conn driver.Conn
}

// chRowsPerInsert is the size of each test INSERT: one block, small enough to
// cost nothing, large enough to be a real part.
const chRowsPerInsert = 1000

func openServers(addrs []string) ([]*chServer, error) {
	var servers []*chServer
	for i, addr := range addrs {
		conn, err := clickhouse.Open(&clickhouse.Options{
			Addr:        []string{addr},
			DialTimeout: 2 * time.Second,
			// A server being killed must not hang a read: every call also has a context deadline.
			ReadTimeout:  30 * time.Second,
			MaxOpenConns: 2,
		})
		if err != nil {
			closeServers(servers)
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		servers = append(servers, &chServer{node: fmt.Sprintf("clickhouse-%d", i+1), addr: addr, conn: conn})
	}
	return servers, nil
}

func closeServers(servers []*chServer) {
	for _, s := range servers {
		_ = s.conn.Close()
	}
}

// within runs f with a deadline: an Exec that never gets an answer must not
// stall the check (FIELD-NOTES: some statements on 18.16 wait for the read timeout).
func within(ctx context.Context, d time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return f(ctx)
}

// ddlCtx gives ON CLUSTER statements a bounded wait for every server (the
// default distributed_ddl_task_timeout is 180 s).
func ddlCtx(ctx context.Context) context.Context {
	return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"distributed_ddl_task_timeout": 60}))
}

func (c *check) clickhouse(ctx context.Context, addrs []string, cluster string) error {
	servers, err := openServers(addrs)
	if err != nil {
		return err
	}
	defer closeServers(servers)

	shard, err := c.chLayout(ctx, servers, cluster)
	if err != nil {
		return err
	}
	if len(shard) < 2 {
		return fmt.Errorf("shard 1 of cluster %s has %d replica(s); the check needs 2", cluster, len(shard))
	}
	first, second := shard[0], shard[1]

	db := "clustercheck_" + c.suffix
	table := db + ".rows"
	if err := within(ctx, 90*time.Second, func(ctx context.Context) error {
		if err := first.conn.Exec(ddlCtx(ctx), fmt.Sprintf("CREATE DATABASE %s ON CLUSTER %s", db, cluster)); err != nil {
			return err
		}
		return first.conn.Exec(ddlCtx(ctx), fmt.Sprintf(
			"CREATE TABLE %s ON CLUSTER %s (id UInt64, written_on String, ver UInt64) "+
				"ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/%s/rows', '{replica}', ver) ORDER BY id",
			table, cluster, db))
	}); err != nil {
		return fmt.Errorf("ON CLUSTER DDL: %w", err)
	}
	defer func() {
		// Killed servers are back by now unless a start failed; then this waits out the DDL timeout and says so.
		rctx := context.WithoutCancel(ctx)
		if err := within(rctx, 90*time.Second, func(ctx context.Context) error {
			return first.conn.Exec(ddlCtx(ctx), fmt.Sprintf("DROP DATABASE IF EXISTS %s ON CLUSTER %s", db, cluster))
		}); err != nil {
			c.say("clickhouse: could not drop %s: %v", db, err)
		}
	}()
	c.say("clickhouse: %s.rows created ON CLUSTER %s (ReplicatedReplacingMergeTree)", db, cluster)

	// Written on one replica, read on the other.
	if err := insertRows(ctx, first, table, 1); err != nil {
		return fmt.Errorf("INSERT on %s: %w", first.node, err)
	}
	took, err := poll(ctx, c.o.Limits.Replicated, 50*time.Millisecond, hasRows(second, table, chRowsPerInsert))
	if err != nil {
		return fmt.Errorf("rows written on %s never reached %s: %w", first.node, second.node, err)
	}
	c.say("clickhouse: %d rows written on %s read on %s after %s", chRowsPerInsert, first.node, second.node, secs(took))

	// kill -9 a replica; writes go on on the other; after a restart it is writable and catches up.
	if err := c.kill(ctx, second.node); err != nil {
		return err
	}
	t0 := time.Now()
	if err := insertRows(ctx, first, table, 2); err != nil {
		return fmt.Errorf("INSERT on %s with %s down: %w", first.node, second.node, err)
	}
	c.say("clickhouse: %s killed (SIGKILL); INSERT on %s went on (%s)", second.node, first.node, secs(time.Since(t0)))
	started, err := c.start(ctx, second.node)
	if err != nil {
		return err
	}
	restart := time.Now()
	writable, err := poll(ctx, c.o.Limits.ReplicaWritable, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		err := insertRows(ctx, second, table, 3)
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("%s not writable after its restart: %w", second.node, err)
	}
	_, err = poll(ctx, c.o.Limits.ReplicaCaughtUp, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		if ok, err := hasRows(second, table, 3*chRowsPerInsert)(ctx); !ok {
			return false, err
		}
		return replicationActive(ctx, second, db)
	})
	if err != nil {
		return fmt.Errorf("%s did not catch up after its restart: %w", second.node, err)
	}
	caughtUp := time.Since(restart)
	c.say("clickhouse: %s restarted in %s; writable %s later; all %d rows and replication active %s after the restart",
		second.node, secs(started), secs(writable), 3*chRowsPerInsert, secs(caughtUp))

	// And the first replica got what was written on the restarted one.
	if _, err := poll(ctx, c.o.Limits.Replicated, 50*time.Millisecond, hasRows(first, table, 3*chRowsPerInsert)); err != nil {
		return fmt.Errorf("rows written on the restarted %s never reached %s: %w", second.node, first.node, err)
	}
	return nil
}

// chLayout checks that every server sees the same cluster and reaches
// ZooKeeper, and returns shard 1's replicas in order.
func (c *check) chLayout(ctx context.Context, servers []*chServer, cluster string) ([]*chServer, error) {
	byAddr := map[string]*chServer{}
	for _, s := range servers {
		byAddr[s.addr] = s
	}
	var want string
	var shard1 []*chServer
	shards := map[uint32]bool{}
	for _, s := range servers {
		var layout string
		var rows [][3]any
		err := within(ctx, 10*time.Second, func(ctx context.Context) error {
			rs, err := s.conn.Query(ctx,
				"SELECT shard_num, replica_num, concat(host_address, ':', toString(port)) FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num",
				cluster)
			if err != nil {
				return err
			}
			defer rs.Close()
			for rs.Next() {
				var shardNum, replicaNum uint32
				var addr string
				if err := rs.Scan(&shardNum, &replicaNum, &addr); err != nil {
					return err
				}
				rows = append(rows, [3]any{shardNum, replicaNum, addr})
				layout += fmt.Sprintf("%d/%d=%s ", shardNum, replicaNum, addr)
			}
			return rs.Err()
		})
		if err != nil {
			return nil, fmt.Errorf("%s: system.clusters: %w", s.node, err)
		}
		if len(rows) == 0 {
			return nil, fmt.Errorf("%s does not know cluster %s (remote_servers)", s.node, cluster)
		}
		if want == "" {
			want = layout
			for _, r := range rows {
				shards[r[0].(uint32)] = true
				if r[0].(uint32) == 1 {
					srv, ok := byAddr[r[2].(string)]
					if !ok {
						return nil, fmt.Errorf("cluster %s names %s, which is not in MORAINE_CLICKHOUSE_ADDR", cluster, r[2])
					}
					shard1 = append(shard1, srv)
				}
			}
		} else if layout != want {
			return nil, fmt.Errorf("%s sees cluster %s as %q, %s as %q", servers[0].node, cluster, want, s.node, layout)
		}
		var znodes uint64
		if err := within(ctx, 10*time.Second, func(ctx context.Context) error {
			return s.conn.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = '/'").Scan(&znodes)
		}); err != nil {
			return nil, fmt.Errorf("%s cannot read ZooKeeper: %w", s.node, err)
		}
	}
	if len(byAddr) != len(shards)*len(shard1) {
		return nil, fmt.Errorf("cluster %s has %d shards x %d replicas, but MORAINE_CLICKHOUSE_ADDR lists %d servers",
			cluster, len(shards), len(shard1), len(byAddr))
	}
	c.say("clickhouse: %d servers see cluster %s as %d shard(s) x %d replicas, and reach ZooKeeper",
		len(servers), cluster, len(shards), len(shard1))
	return shard1, nil
}

// insertRows writes batch n: ids (n-1)*chRowsPerInsert+1 .. n*chRowsPerInsert,
// as one block. A retried identical block is dropped by the replicated table
// (block deduplication), so retrying after an unclear failure adds nothing twice.
func insertRows(ctx context.Context, s *chServer, table string, n int) error {
	return within(ctx, 15*time.Second, func(ctx context.Context) error {
		batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+table+" (id, written_on, ver)")
		if err != nil {
			return err
		}
		defer func() { _ = batch.Abort() }()
		for i := 1; i <= chRowsPerInsert; i++ {
			if err := batch.Append(uint64((n-1)*chRowsPerInsert+i), s.node, uint64(1)); err != nil {
				return err
			}
		}
		return batch.Send()
	})
}

// hasRows reports whether the server holds want distinct ids.
func hasRows(s *chServer, table string, want uint64) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		var n uint64
		err := within(ctx, 5*time.Second, func(ctx context.Context) error {
			return s.conn.QueryRow(ctx, "SELECT uniqExact(id) FROM "+table).Scan(&n)
		})
		if err != nil {
			return false, err
		}
		if n != want {
			return false, fmt.Errorf("%s has %d of %d rows", s.node, n, want)
		}
		return true, nil
	}
}

// replicationActive: the server's replica of the table is writable, its
// session is live and every replica is active (a restarted replica whose old
// session has not expired yet does not fetch or count as active).
func replicationActive(ctx context.Context, s *chServer, db string) (bool, error) {
	var readonly, expired, active, total uint8
	err := within(ctx, 5*time.Second, func(ctx context.Context) error {
		return s.conn.QueryRow(ctx,
			"SELECT is_readonly, is_session_expired, active_replicas, total_replicas FROM system.replicas WHERE database = ? AND table = 'rows'",
			db).Scan(&readonly, &expired, &active, &total)
	})
	if err != nil {
		return false, err
	}
	if readonly != 0 || expired != 0 || active != total {
		return false, fmt.Errorf("%s: readonly %d, session expired %d, active replicas %d of %d", s.node, readonly, expired, active, total)
	}
	return true, nil
}
