// Package clustercheck checks the local cluster of deploy/stack/stack.sh's
// cluster profile (`make cluster-check`): that every node is up and
// configured as documented, and that it survives the crashes the fault suite
// relies on. It talks to the engines with their plain clients
// (clickhouse-go, franz-go), not through moraine's code, so it judges the
// stack on its own.
//
// The steps, in order, each printed with its figures as it passes:
//
//   - nodes: `stack.sh cluster status` reports every node answering; every
//     ClickHouse server sees the cluster with the same shards and replicas
//     and reaches ZooKeeper; Kafka has its three brokers, each with the
//     replication settings of the profile (replication factor 3 for topics,
//     offsets and the transaction log; min.insync.replicas 2, also for the
//     transaction log).
//   - ClickHouse: a ReplicatedReplacingMergeTree table created ON CLUSTER,
//     rows written on one replica are read on the other; that replica is
//     SIGKILLed, writes go on on the first, and after a restart it must
//     accept an INSERT again and hold every row with its replication active
//     within the limits.
//   - Kafka: on a topic with replication factor 3 and min.insync.replicas 2,
//     an idempotent acks=all producer sends without pause while the
//     partition's leader is SIGKILLed and later restarted. No send may fail,
//     the restarted broker must be back in the in-sync replicas within the
//     limit, and every acknowledged record must be read back.
//
// The check leaves the cluster as it found it: killed nodes are started again
// and its database and topic are dropped, also when a step fails.
package clustercheck
