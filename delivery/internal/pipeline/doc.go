// Package pipeline is the delivery of address-activity webhooks: it
// consumes the activity topic (one record per matched (webhook,
// transaction), value codec.EncodeActivity, payload = the RFC 8785 body to
// POST) in a consumer group, signs and POSTs every message, retries it on
// the hosted service's schedule without blocking other endpoints,
// deactivates failing webhooks by the plans' rules, and records every
// attempt.
//
// # Guarantees
//
//   - At least once. A record's offset is committed only after the message
//     needs nothing more from this process: delivered (any 2xx), dropped
//     because its webhook is inactive (recorded), its next attempt durably
//     written to a retry level (Kafka acks=all), or its failure durably
//     counted and acted on. A crash, a SIGKILL or a rebalance at any point
//     makes some attempts happen again, never fewer.
//   - Deterministic messageId. Every attempt of a message, and every
//     redelivery, carries the matcher's messageId (in the body and as the
//     webhook-id header), so receivers drop duplicates by it.
//   - Durable retries. A pending retry is a Kafka record, not a timer: a
//     restart of any delivery instance (or all of them) loses none, and the
//     wait resumes from the record's due time.
//   - Isolation. A slow or dead endpoint never delays other endpoints:
//     attempts are bounded per endpoint host (--delivery.max-per-host, 16)
//     and in all (--delivery.max-in-flight, 512); messages waiting for a
//     busy host are bounded in time (--delivery.host-queue-timeout) and,
//     for a slow host, in number (--delivery.max-host-queue), beyond which
//     they are parked on the first retry level without spending an attempt;
//     and a partition keeps dispatching past an unfinished record (the
//     window counts unfinished records only). The commit offset waits for
//     the oldest unfinished record (at most one attempt timeout plus the
//     queue timeout), so a crash redelivers what followed it.
//   - No ordering across messages: each message follows its own schedule
//     (as the hosted service documents).
//
// # Attempts and the retry schedule (CONTRACT.md section 5.5)
//
// Attempt 1 is made when the activity record is read. An attempt is a POST
// with a 10 s timeout (--delivery.timeout); any 2xx is success; any other
// status (redirects are not followed), a timeout, a network error or a
// refused target (package guard) is a failure. After failed attempt n the
// next is due --delivery.retry-schedule[n-1] after the failure: by default
// 10 s, then 1 min, 5 min, 10 min, 30 min, 2 h, 6 h, 12 h and 24 h, ten
// attempts in all (about 44.8 hours). Tests compress it
// (--delivery.retry-schedule=100ms,...).
//
// # How retries are stored: one Kafka topic per delay
//
// schemas/topics declares nine retry levels (moraine.delivery-retry-1..9,
// 4 partitions, 7 days retention: far above the longest delay). Failed
// attempt n produces the unchanged activity value to level n with headers
// attempt (n+1) and due-unix-ms; only then is the record that carried
// attempt n finished. Every record of a level waits the same delay, so
// each partition is in due order: its consumer takes the head, sleeps
// until it is due, dispatches it, takes the next. Records fetched ahead
// are held in memory up to --delivery.partition-window; beyond that the
// partition's fetching is paused (franz-go PauseFetchPartitions) and
// resumed when the queue has drained to half. The activity topic and the
// nine levels are consumed by one consumer group (--delivery.group), so
// retries scale out and move with the partitions like everything else.
//
// # Deactivation (package deactivate)
//
// Free plan: the sixth message that fails attempts 1 and 2 (the hosted
// service's "six messages fail both" and "five messages in the retry
// queue") deactivates the webhook; a message that fails its last attempt
// does too, on every plan. Counts are rows of ClickHouse's
// delivery_strikes, written before the message is committed. Deactivation
// goes through pkg/watch.Writer, the API's own crash-safe path (ClickHouse,
// then the address-watch topic; the query service's reconciler repairs a
// failed publish). An inactive webhook's messages, pending retries
// included, are dropped and recorded (result inactive); PATCH status
// active resumes delivery of new messages and restarts the count.
//
// # Signatures (package sign, docs/webhook-signatures.md)
//
// x-signature = base64(HMAC-SHA256(key, body)), plus Standard Webhooks
// webhook-id (the messageId), webhook-timestamp (Unix seconds of the
// attempt) and webhook-signature ("v1," + base64 HMAC-SHA256 of
// id.timestamp.body). The key is the account's shared secret hex-decoded
// (default) or its UTF-8 bytes (--delivery.signature-key-encoding=utf8,
// the ChainKit SDK's validateWebhook reading). An account without a
// secret gets its messages unsigned (no x-signature, no
// webhook-signature; webhook-id and webhook-timestamp still sent), counted
// in moraine_delivery_unsigned_total and logged; `moraine-admin dev-key`
// gives the development account a secret. Receivers that verify reject
// such messages, which is the safe failure.
//
// Stream headers (moraine extensions, docs/webhook-stream.md): every
// message the matcher numbered carries moraine-sequence, moraine-message-kind
// (activity or retraction), moraine-replay on replayed messages, and
// moraine-signature over them and the body. Retractions are delivered,
// retried and counted like any other message.
//
// # Replays
//
// The replay topic (topics.Replay, produced by the processor's replay
// jobs) is consumed by the same group. Its messages are signed and sent
// like live ones, with moraine-replay, but on a limiter of their own
// (--delivery.replay-max-in-flight, --delivery.replay-max-per-host): a
// replay never takes, and never waits for, a live message's attempt slot,
// so it cannot delay one. A failed replayed message is retried in place
// after each wait of --delivery.replay-retry-schedule (its record held,
// within the partition window) and then given up: the replay can be run
// again, and its failures count toward no deactivation. Its attempts are
// logged with the replay's id.
//
// # Delivery log (package dlog)
//
// Every attempt is a row of ClickHouse's deliveries table (migration
// 000004): message, webhook, account, chain, transaction, attempt, HTTP
// status (0 without a response), result, latency, error (URL userinfo and
// query redacted), attempted_at and next_attempt_at. Rows are buffered and
// inserted every 200 ms or 5,000 rows; the log is best-effort (a crash
// loses the buffer), unlike the strikes. The query service lists it at
// GET /v1/webhooks/{id}/deliveries.
//
// # Metrics
//
//	moraine_delivery_attempts_total{result}          success, http_error, timeout, network, refused_target
//	moraine_delivery_attempt_duration_seconds
//	moraine_delivery_end_to_end_latency_seconds      block_fetched_at_unix_ms to the 2xx
//	moraine_delivery_retries_pending                 messages on the retry levels (group lag, all instances)
//	moraine_delivery_retries_scheduled_total
//	moraine_delivery_in_flight                       attempts in progress
//	moraine_delivery_messages_dropped_total{reason}  inactive, unknown_webhook, malformed
//	moraine_delivery_deferred_total                  parked for a busy host (no attempt spent)
//	moraine_delivery_unsigned_total                  sent without signatures (no shared secret)
//	moraine_delivery_replay_attempts_total{result}   attempts of replayed messages (not in attempts_total)
//	moraine_delivery_replay_in_flight
//	moraine_delivery_replay_messages_given_up_total  replayed messages that failed every attempt
//	moraine_delivery_webhooks_deactivated_total{reason}  free_double_failures, exhausted (package deactivate)
//	moraine_delivery_log_rows_total{result}          written, dropped (package dlog)
//	moraine_delivery_log_flush_duration_seconds
//	moraine_delivery_log_partitions_dropped_total     months of the log dropped by --delivery.log-retention
//	moraine_delivery_watch_records_produced_total{result}, moraine_delivery_watch_produce_duration_seconds (pkg/watch)
//	moraine_delivery_accountdb_duration_seconds{statement} (pkg/accountdb)
//	moraine_kafka_consumer_lag_records{group,topic,partition} and franz-go's moraine_kafka_*{client} (pkg/kafkautil)
package pipeline
