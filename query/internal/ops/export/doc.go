// Package export serves the hosted Operations routes, transaction export
// jobs, as routes of the table:
//
//	POST /v1/operations/transactions:export   postTransactionExportJob  accept a job: 201 with its operation, RUNNING
//	GET  /v1/operations/{operationId}         getOperationResult        its status; when done, downloadUrl (and nextDate
//	                                                                    when the export was cut at the plan's size)
//	GET  /v1/operations/{operationId}:download getOperationFile         the CSV (a moraine extension: downloadUrl points
//	                                                                    here, signed, so it works without an API key)
//
// A job exports the EVM transactions of up to --export.max-addresses
// addresses on the chains it names (includeChains) whose blocks fall in
// [firstDate, lastDate] (UTC days, both included; the deprecated
// startDate/endDate are read too): every transaction an address took part
// in, as the address-history routes list them, once per transaction, in
// time order, as CSV (the columns: csvHeader). A bad request is a 400 that
// says what is wrong, before anything is queued: an unknown type (primary
// network exports are not served), a date that is not YYYY-MM-DD, a range
// backwards, in the future or longer than --export.max-days, a malformed
// address, a chain that is not configured.
//
// # Size
//
// The plan bounds an export (plan.Plan.ExportTransactions: free 10,000
// transactions up to enterprise 2,000,000). An export that would exceed it
// stops at a day boundary: it holds every transaction of the days before
// the one that did not fit, and completes COMPLETED_WITH_WARNING, code
// WarnTruncatedExport, nextDate that day (the firstDate of a follow-up
// request). A first day that alone exceeds the limit fails the job
// (ErrInvalidRequest, saying so): a follow-up could not progress.
//
// # Durable, on any instance
//
// The job lives in ClickHouse (operations: one row per version of its
// state; operation_files: its CSV in parts of about a megabyte, per
// attempt) and is handed to a worker through the operations topic (Kafka,
// keyed by operation id). Any query instance runs workers
// (--export.workers, a consumer group) and any answers getOperationResult
// and serves downloads, from ClickHouse. POST answers 201 only once the
// job is both in ClickHouse and on the topic (Kafka down: 503, the job
// marked FAILED). A worker commits the task only after the job's final
// state is written, so an instance that dies mid-job (or is restarted) has
// its job run again by whichever instance gets the partition: a new
// attempt, whose parts are its own; the final state names the attempt that
// produced the file. After --export.max-attempts the job fails
// (ErrInternal). Every minute each instance also republishes jobs left
// RUNNING without progress for 10 minutes (a task lost between ClickHouse
// and Kafka); a running job refreshes its state every minute, so it is not
// republished, and a task for a finished job does nothing.
//
// Retention: an operation and its files are dropped --export.retention
// after the day it was created (day partitions); a download link is valid
// for 24 hours from the getOperationResult that gave it (ask again for a
// fresh one).
//
// # Metrics
//
//	moraine_query_export_jobs_total{result}        completed, truncated, failed (the request's fault), error (an attempt that failed), abandoned (attempts used up)
//	moraine_query_export_transactions_total        transactions written to export files
//	moraine_query_export_job_duration_seconds      time of one attempt
//	moraine_query_export_running                   jobs this instance runs now
package export
