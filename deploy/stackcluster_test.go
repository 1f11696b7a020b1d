package deploy_test

// Checks of the cluster profile's generated configuration (deploy/stack/cluster.sh, its templates and
// cluster-layout.sh) without starting anything: `stack.sh cluster config` renders every node's files into
// a temporary state dir, and the test reads them the way the servers would. A running cluster is checked by
// `make cluster-check` (package clustercheck).

import (
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The single-node stack's and `make run`'s fixed ports: the cluster must never take one.
var singleNodePorts = []int{9000, 8123, 9009, 9092, 9093, 8080, 8545, 9101, 9102, 9103, 9104}

type chMainConfig struct {
	TCPPort  int    `xml:"tcp_port"`
	HTTPPort int    `xml:"http_port"`
	Path     string `xml:"path"`
}

type chClusterConfig struct {
	InterserverHost string `xml:"interserver_http_host"`
	InterserverPort int    `xml:"interserver_http_port"`
	ZooKeeper       struct {
		Nodes []struct {
			Host string `xml:"host"`
			Port int    `xml:"port"`
		} `xml:"node"`
		SessionTimeoutMs int `xml:"session_timeout_ms"`
	} `xml:"zookeeper"`
	Macros struct {
		Cluster string `xml:"cluster"`
		Shard   int    `xml:"shard"`
		Replica string `xml:"replica"`
	} `xml:"macros"`
	RemoteServers struct {
		Moraine struct {
			Shards []struct {
				InternalReplication bool `xml:"internal_replication"`
				Replicas            []struct {
					Host string `xml:"host"`
					Port int    `xml:"port"`
				} `xml:"replica"`
			} `xml:"shard"`
		} `xml:"moraine"`
	} `xml:"remote_servers"`
	DDLPath string `xml:"distributed_ddl>path"`
}

func renderCluster(t *testing.T, env ...string) (dir string, vars map[string]string) {
	t.Helper()
	dir = t.TempDir()
	run := func(args ...string) string {
		cmd := exec.Command("bash", append([]string{"stack/stack.sh", "cluster"}, args...)...)
		cmd.Env = append(os.Environ(), append([]string{"MORAINE_STATE_DIR=" + dir}, env...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("stack.sh cluster %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("config")
	vars = map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(run("env")), "\n") {
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			t.Fatalf("stack.sh cluster env printed %q", line)
		}
		vars[name] = value
	}
	return filepath.Join(dir, "cluster"), vars
}

func readXML(t *testing.T, path string, v any) {
	t.Helper()
	if err := xml.Unmarshal(readFile(t, path), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// properties reads a Java properties file (key=value lines; # comments).
func properties(t *testing.T, path string) map[string]string {
	t.Helper()
	p := map[string]string{}
	for _, line := range strings.Split(string(readFile(t, path)), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		p[k] = v
	}
	return p
}

// portOf returns the port of a host:port, PROTO://host:port or id@host:port.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	i := strings.LastIndex(addr, ":")
	p, err := strconv.Atoi(addr[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("no port in %q", addr)
	}
	return p
}

func TestClusterProfileConfig(t *testing.T) {
	for _, tc := range []struct {
		name           string
		env            []string
		base           int
		shards, perSrd int
	}{
		// The default layout: 1 shard x 2 replicas on ports from 19000.
		{name: "default", base: 19000, shards: 1, perSrd: 2},
		// Another base and 2 shards x 2 replicas: every port moves, the shards are laid out in order.
		{name: "2x2 at 23000", env: []string{"MORAINE_CLUSTER_PORT_BASE=23000", "MORAINE_CLUSTER_CLICKHOUSE_SHARDS=2"}, base: 23000, shards: 2, perSrd: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, vars := renderCluster(t, tc.env...)
			ports := map[int]string{}
			claim := func(port int, what string) {
				t.Helper()
				if other, ok := ports[port]; ok {
					t.Errorf("port %d is used by %s and %s", port, other, what)
				}
				ports[port] = what
			}
			servers := tc.shards * tc.perSrd

			zk := properties(t, filepath.Join(dir, "zookeeper", "zoo.cfg"))
			zkPort, _ := strconv.Atoi(zk["clientPort"])
			claim(zkPort, "zookeeper")
			if zk["admin.enableServer"] != "false" {
				t.Errorf("zookeeper's AdminServer is on (it takes port 8080)")
			}

			var chAddrs []string
			for n := 1; n <= servers; n++ {
				node := fmt.Sprintf("clickhouse-%d", n)
				var mainCfg chMainConfig
				var cl chClusterConfig
				readXML(t, filepath.Join(dir, node, "config.xml"), &mainCfg)
				readXML(t, filepath.Join(dir, node, "config.d", "cluster.xml"), &cl)
				claim(mainCfg.TCPPort, node+" native")
				claim(mainCfg.HTTPPort, node+" http")
				claim(cl.InterserverPort, node+" interserver")
				if mainCfg.Path != filepath.Join(dir, node, "data")+"/" {
					t.Errorf("%s keeps its data in %s", node, mainCfg.Path)
				}
				chAddrs = append(chAddrs, fmt.Sprintf("127.0.0.1:%d", mainCfg.TCPPort))
				if cl.InterserverHost != "127.0.0.1" {
					t.Errorf("%s: interserver_http_host %q", node, cl.InterserverHost)
				}
				if len(cl.ZooKeeper.Nodes) != 1 || cl.ZooKeeper.Nodes[0].Port != zkPort {
					t.Errorf("%s: zookeeper %+v, want 127.0.0.1:%d", node, cl.ZooKeeper.Nodes, zkPort)
				}
				// 5-10 s: a replica restarted after kill -9 is read-only until its old session expires.
				if ms := cl.ZooKeeper.SessionTimeoutMs; ms < 5000 || ms > 10000 {
					t.Errorf("%s: zookeeper session_timeout_ms %d", node, ms)
				}
				if cl.Macros.Cluster != "moraine" || cl.Macros.Replica != node || cl.Macros.Shard != (n-1)/tc.perSrd+1 {
					t.Errorf("%s: macros %+v", node, cl.Macros)
				}
				if cl.DDLPath == "" {
					t.Errorf("%s: no distributed_ddl path", node)
				}
				// Every server lists the same cluster; each lists itself under its own shard.
				shards := cl.RemoteServers.Moraine.Shards
				if len(shards) != tc.shards {
					t.Fatalf("%s: %d shards in remote_servers, want %d", node, len(shards), tc.shards)
				}
				var listed []string
				for s, sh := range shards {
					if !sh.InternalReplication {
						t.Errorf("%s: shard %d without internal_replication", node, s+1)
					}
					if len(sh.Replicas) != tc.perSrd {
						t.Errorf("%s: shard %d has %d replicas, want %d", node, s+1, len(sh.Replicas), tc.perSrd)
					}
					for _, r := range sh.Replicas {
						listed = append(listed, fmt.Sprintf("%s:%d/%d", r.Host, r.Port, s+1))
					}
				}
				if self := fmt.Sprintf("127.0.0.1:%d/%d", mainCfg.TCPPort, cl.Macros.Shard); !slices.Contains(listed, self) {
					t.Errorf("%s (%s) is not in its own remote_servers %v", node, self, listed)
				}
			}
			if got := vars["MORAINE_CLICKHOUSE_ADDR"]; got != strings.Join(chAddrs, ",") {
				t.Errorf("env MORAINE_CLICKHOUSE_ADDR=%s, the servers listen on %s", got, strings.Join(chAddrs, ","))
			}
			if vars["MORAINE_CLICKHOUSE_CLUSTER"] != "moraine" {
				t.Errorf("env MORAINE_CLICKHOUSE_CLUSTER=%q", vars["MORAINE_CLICKHOUSE_CLUSTER"])
			}

			var brokers, voters []string
			for n := 1; n <= 3; n++ {
				node := fmt.Sprintf("kafka-%d", n)
				p := properties(t, filepath.Join(dir, node, "server.properties"))
				if p["node.id"] != strconv.Itoa(n) || p["process.roles"] != "broker,controller" {
					t.Errorf("%s: node.id %q, process.roles %q", node, p["node.id"], p["process.roles"])
				}
				for k, want := range map[string]string{
					"default.replication.factor": "3", "min.insync.replicas": "2", "offsets.topic.replication.factor": "3",
					"transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
				} {
					if p[k] != want {
						t.Errorf("%s: %s=%q, want %s", node, k, p[k], want)
					}
				}
				listeners := strings.Split(p["listeners"], ",")
				if len(listeners) != 2 {
					t.Fatalf("%s: listeners %q", node, p["listeners"])
				}
				claim(portOf(t, listeners[0]), node+" broker")
				claim(portOf(t, listeners[1]), node+" controller")
				brokers = append(brokers, strings.TrimPrefix(p["advertised.listeners"], "PLAINTEXT://"))
				voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", n, portOf(t, listeners[1])))
				if filepath.Dir(p["log.dirs"]) != filepath.Join(dir, node) {
					t.Errorf("%s: log.dirs %s", node, p["log.dirs"])
				}
			}
			for n := 1; n <= 3; n++ {
				p := properties(t, filepath.Join(dir, fmt.Sprintf("kafka-%d", n), "server.properties"))
				if p["controller.quorum.voters"] != strings.Join(voters, ",") {
					t.Errorf("kafka-%d: controller.quorum.voters=%s, want %s", n, p["controller.quorum.voters"], strings.Join(voters, ","))
				}
			}
			if got := vars["MORAINE_KAFKA_BROKERS"]; got != strings.Join(brokers, ",") {
				t.Errorf("env MORAINE_KAFKA_BROKERS=%s, the brokers advertise %s", got, strings.Join(brokers, ","))
			}

			nginx := string(readFile(t, filepath.Join(dir, "nginx", "nginx.conf")))
			if strings.Contains(nginx, "@") {
				t.Errorf("nginx.conf has an unreplaced placeholder")
			}
			listen := regexp.MustCompile(`listen 127\.0\.0\.1:(\d+);`).FindStringSubmatch(nginx)
			if listen == nil {
				t.Fatal("nginx.conf: no listen 127.0.0.1:PORT")
			}
			api, _ := strconv.Atoi(listen[1])
			claim(api, "nginx")
			if vars["MORAINE_CLUSTER_API_URL"] != "http://127.0.0.1:"+listen[1] {
				t.Errorf("env MORAINE_CLUSTER_API_URL=%s, nginx listens on %s", vars["MORAINE_CLUSTER_API_URL"], listen[1])
			}
			upstreams := regexp.MustCompile(`server 127\.0\.0\.1:(\d+) max_fails`).FindAllStringSubmatch(nginx, -1)
			if len(upstreams) != 2 {
				t.Errorf("nginx.conf: %d upstream servers, want the 2 query instances", len(upstreams))
			}
			for i, u := range upstreams {
				p, _ := strconv.Atoi(u[1])
				claim(p, fmt.Sprintf("query-%d", i+1))
			}
			if !strings.Contains(nginx, "proxy_next_upstream error timeout http_502 http_503;") {
				t.Errorf("nginx.conf does not pass a failed request on to the next query instance")
			}

			for port, what := range ports {
				if port < tc.base || port > tc.base+545 {
					t.Errorf("%s on port %d, outside the cluster's block %d..%d", what, port, tc.base, tc.base+545)
				}
				if slices.Contains(singleNodePorts, port) {
					t.Errorf("%s on port %d, which the single-node stack uses", what, port)
				}
			}
		})
	}
}
